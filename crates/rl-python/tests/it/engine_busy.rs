//! rl_engine's SQLite busy timeout over skyrl-tx's (`rl_engine.lengthen_sqlite_busy_timeout`),
//! read back from a connection made the way skyrl-tx's server and engine make theirs, in the
//! engine's own venv against the real skyrl-tx.

use std::process::Command;

const CHECK: &str = r#"
import asyncio, sys, tempfile
from rl_engine import SQLITE_BUSY_MS, install_peft_standin, lengthen_sqlite_busy_timeout
install_peft_standin()
lengthen_sqlite_busy_timeout()
lengthen_sqlite_busy_timeout()  # once is what counts: no wrapper of the wrapper
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine
from sqlmodel import create_engine
from tx.tinker.db_models import enable_sqlite_wal
path = tempfile.mkdtemp() + "/tinker.db"
engine = create_engine(f"sqlite:///{path}")
enable_sqlite_wal(engine)
with engine.connect() as connection:
    sync_ms = connection.execute(text("PRAGMA busy_timeout")).scalar()
    journal = connection.execute(text("PRAGMA journal_mode")).scalar()
async def read():
    server = create_async_engine(f"sqlite+aiosqlite:///{path}")
    enable_sqlite_wal(server.sync_engine)
    async with server.connect() as connection:
        return (await connection.execute(text("PRAGMA busy_timeout"))).scalar()
print(SQLITE_BUSY_MS, sync_ms, asyncio.run(read()), journal, enable_sqlite_wal.__wrapped__.__module__)
"#;

#[test]
#[ignore = "needs the local engine's venv: `cargo xtask test` runs it"]
fn the_engines_sqlite_connections_wait_for_a_busy_writer_far_longer_than_upstreams_5_s() {
    let local = rl_test_support::local_engine();
    let programs = rl_test_support::workspace_root().join("crates/rl-python/python");
    let output = Command::new(&local.python)
        .args(["-c", CHECK])
        .current_dir(&programs)
        .env("PYTHONPATH", &programs)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        said.split_whitespace().collect::<Vec<_>>(),
        ["120000", "120000", "120000", "wal", "tx.tinker.db_models"],
        "{said}"
    );
}
