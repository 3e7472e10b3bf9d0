//! Which prompts a test of a run's checkpoint asked (`Prompts`): the environment's eval split,
//! the held-out slice, or training items, and whether the run trained on them — the sentence
//! `rl compare`'s and an evaluation's answers say.

use rl_preflight::DrawnItems;

/// Which prompts a comparison asked, and whether the run trained on them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Prompts {
    /// `held-out slice`, `eval split` or `training items`.
    pub(crate) source: String,
    pub(crate) kept_out_of_training: bool,
    /// What the sentence of the answer says.
    pub(crate) description: String,
}

impl Prompts {
    pub(crate) fn of(drawn: Option<DrawnItems>, held_out: Option<rl_settings::HeldOut>) -> Self {
        let Some(drawn) = drawn else {
            // Nothing said which items were drawn: with a slice kept out, the test did not get
            // as far as drawing (it would have said), so no claim about the slice is true.
            if let Some(slice) = held_out.filter(|slice| slice.fraction > 0.0) {
                return Self {
                    source: "none drawn".to_owned(),
                    kept_out_of_training: false,
                    description: format!(
                        "no prompt was drawn (the test ended before its environment gave one; \
                         the run kept {} of its items out of training, seed {})",
                        slice.fraction, slice.seed
                    ),
                };
            }
            return Self {
                source: "training items".to_owned(),
                kept_out_of_training: false,
                description: "the first items the environment gives, which training drew too \
                              ([held_out] fraction is 0): a gain may be memory, not skill"
                    .to_owned(),
            };
        };
        let exhausted = if drawn.exhausted {
            format!(
                "; all {} there are (ask for fewer prompts, or keep a larger fraction of the items out: [held_out] fraction)",
                drawn.drawn
            )
        } else {
            String::new()
        };
        if drawn.source == "eval split" {
            return Self {
                source: drawn.source,
                kept_out_of_training: true,
                description: format!(
                    "{} distinct items of the environment's eval split (get_next_eval_item), \
                     which training never draws{exhausted}",
                    drawn.drawn
                ),
            };
        }
        let kept = held_out
            .is_some_and(|slice| slice.fraction == drawn.fraction && slice.seed == drawn.seed);
        let slice = format!(
            "{} distinct items of the held-out slice ({} of the items by content, seed {})",
            drawn.drawn, drawn.fraction, drawn.seed
        );
        let description = if kept {
            format!("{slice}, which the run never trained on{exhausted}")
        } else {
            format!(
                "{slice}; the run did not keep this slice out of training (it started before \
                 [held_out] or with another environment command), so a gain may be memory, \
                 not skill{exhausted}"
            )
        };
        Self {
            source: drawn.source,
            kept_out_of_training: kept,
            description,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drawn(source: &str, exhausted: bool) -> DrawnItems {
        DrawnItems {
            source: source.to_owned(),
            fraction: 0.25,
            seed: 7,
            drawn: 4,
            skipped: 9,
            exhausted,
        }
    }

    const SLICE: rl_settings::HeldOut = rl_settings::HeldOut {
        fraction: 0.25,
        seed: 7,
    };

    #[test]
    fn only_a_slice_the_run_kept_out_is_said_unseen() {
        let kept = Prompts::of(Some(drawn("held-out slice", false)), Some(SLICE));
        assert!(kept.kept_out_of_training);
        assert_eq!(kept.source, "held-out slice");
        assert!(kept.description.ends_with("which the run never trained on"));

        for other in [
            None,
            Some(rl_settings::HeldOut {
                fraction: 0.25,
                seed: 8,
            }),
        ] {
            let not_kept = Prompts::of(Some(drawn("held-out slice", false)), other);
            assert!(!not_kept.kept_out_of_training);
            assert!(not_kept.description.contains("memory, not skill"));
        }
    }

    #[test]
    fn an_eval_split_is_unseen_and_training_items_are_not() {
        let eval = Prompts::of(Some(drawn("eval split", true)), None);
        assert!(eval.kept_out_of_training);
        assert!(eval.description.contains("all 4 there are"));
        let training = Prompts::of(None, None);
        assert_eq!(training.source, "training items");
        assert!(!training.kept_out_of_training);
    }

    /// A test that drew nothing though the run kept a slice out (its model never started)
    /// claims nothing about the slice: not "fraction is 0".
    #[test]
    fn nothing_drawn_from_a_kept_slice_is_said_as_such() {
        let none = Prompts::of(None, Some(SLICE));
        assert_eq!(none.source, "none drawn");
        assert!(!none.kept_out_of_training);
        assert!(
            none.description.contains("no prompt was drawn") && !none.description.contains("is 0"),
            "{}",
            none.description
        );
    }
}
