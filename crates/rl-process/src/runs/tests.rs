use super::variables::secrets_for;
use super::*;

#[test]
fn the_trainer_reads_its_evaluation_command_as_a_json_list_ending_with_the_run_id() {
    let id = RunId::parse("0123abcd").unwrap();
    let evaluate = EvaluateCommand {
        program: "/usr/bin/rl".into(),
        args: ["--home", "/h \"q\"", "--json", "runs", "evaluate"]
            .map(OsString::from)
            .to_vec(),
    };
    assert_eq!(
        evaluate.for_run(&id).unwrap(),
        r#"["/usr/bin/rl","--home","/h \"q\"","--json","runs","evaluate","0123abcd"]"#
    );
    let not_text = EvaluateCommand {
        program: <OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(b"/opt/\xff/rl").into(),
        args: Vec::new(),
    };
    assert!(matches!(
        not_text.for_run(&id),
        Err(ProcessError::Launch {
            component: Component::Trainer,
            ..
        })
    ));
}

#[test]
fn the_hosted_tinker_key_reaches_only_a_trainer_that_talks_to_the_hosted_tinker() {
    assert!(secrets_for(Component::Trainer, false, &[]).contains(&"TINKER_API_KEY"));
    assert!(!secrets_for(Component::Trainer, true, &[]).contains(&"TINKER_API_KEY"));
    for component in [Component::Engine, Component::Api, Component::Env] {
        for local in [false, true] {
            assert!(!secrets_for(component, local, &[]).contains(&"TINKER_API_KEY"));
        }
    }
}

/// The environment runs the environment's own code: a provider key reaches it only when the
/// operator allows environments that key, and no other component ever gets one.
#[test]
fn a_provider_key_reaches_only_the_environment_and_only_when_allowed() {
    let allowed = ["OPENROUTER_API_KEY".to_owned()];
    assert_eq!(secrets_for(Component::Env, false, &[]), ["WANDB_API_KEY"]);
    assert_eq!(
        secrets_for(Component::Env, false, &allowed),
        ["WANDB_API_KEY", "OPENROUTER_API_KEY"]
    );
    for component in [Component::Engine, Component::Api, Component::Trainer] {
        for local in [false, true] {
            let kept = secrets_for(component, local, &allowed);
            assert!(
                !kept.contains(&"OPENROUTER_API_KEY") && !kept.contains(&"OPENAI_API_KEY"),
                "{component:?}: {kept:?}"
            );
        }
    }
}
