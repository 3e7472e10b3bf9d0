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
    assert!(secrets_for(Component::Trainer, false).contains(&"TINKER_API_KEY"));
    assert!(!secrets_for(Component::Trainer, true).contains(&"TINKER_API_KEY"));
    for component in [Component::Engine, Component::Api, Component::Env] {
        for local in [false, true] {
            assert!(!secrets_for(component, local).contains(&"TINKER_API_KEY"));
        }
    }
}
