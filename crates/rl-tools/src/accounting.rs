//! A run's accounting and usage read off its files (its metrics file, its config's prices):
//! what a status, a results answer, a run page, a listing and a sweep's table show. Below the
//! operations that answer with them (`costs.rs`, `runs.rs`, `page.rs`, `sweeps/`), so that
//! none of those depends on another for it.

use std::path::Path;

use rl_metrics::{Accounting, HistoryRow, latest_totals, read_metrics_file};
use rl_settings::{RunConfig, RunFolder};

use crate::answers::{AccountingView, UsageView};

/// The run's accounting from its metrics file, beside `config` (its `config.yaml`).
pub(crate) fn accounting_of(config: &Path) -> Option<AccountingView> {
    let folder = RunFolder::at(config.parent()?);
    let metrics = read_metrics_file(&folder.metrics()).ok()?;
    accounting_from(&metrics.trainer?.history, config)
}

/// The accounting of a run whose trainer's rows are read already; its currency when priced.
pub(crate) fn accounting_from(rows: &[HistoryRow], config: &Path) -> Option<AccountingView> {
    let accounting = Accounting::of(rows)?;
    Some(AccountingView::new(
        &accounting,
        priced_currency(config).as_deref(),
    ))
}

/// A run's latest totals, read from the end of its metrics file.
pub(crate) fn usage_of(config: &Path) -> Option<UsageView> {
    let folder = RunFolder::at(config.parent()?);
    let totals = latest_totals(&folder.metrics()).ok()??;
    Some(UsageView::new(&totals, priced_currency(config).as_deref()))
}

/// The run's currency when its operator set a price.
pub(crate) fn priced_currency(config: &Path) -> Option<String> {
    let trainer = RunConfig::read(config).ok()?.trainer().ok()?;
    trainer.prices.is_some().then_some(trainer.currency)
}
