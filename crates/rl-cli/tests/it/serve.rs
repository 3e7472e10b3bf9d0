//! `rl serve` as its clients use it: the real binary on a free loopback port, every route
//! asked over plain HTTP/1.1, every answer (errors included) JSON.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::{rl_command, workspace_root};

/// Longest wait for one answer: a pre-flight test against the fixture server takes seconds.
pub(crate) const ANSWER_TIMEOUT: Duration = Duration::from_secs(240);

/// `rl serve --addr 127.0.0.1:0` with its own state directory; killed on drop.
pub(crate) struct Server {
    pub(crate) child: Child,
    address: SocketAddr,
    /// Everything it wrote, stdout and stderr.
    output: Arc<Mutex<String>>,
    /// The threads copying its stdout and stderr into `output`; they end at end of stream.
    readers: Vec<std::thread::JoinHandle<()>>,
    pub(crate) home: tempfile::TempDir,
    /// Sent as `Authorization: Bearer` by [`Server::request`].
    pub(crate) token: Option<String>,
}

/// One HTTP answer.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    /// The header block, lower-cased.
    headers: String,
    pub(crate) body: Value,
}

/// `rl` with the state directory `home` (`RL_HOME`), no tree and no key from this process.
pub(crate) fn serve_command(home: &Path, extra: &[&str], env: &[(&str, &str)]) -> Command {
    let mut command = rl_command(home);
    command.arg("serve").args(extra).envs(env.iter().copied());
    command
}

/// `rl --home DIR ARGS --json` with no `RL_HOME`, as a separate process: its answer, which
/// must be a success.
pub(crate) fn rl_by_home_flag(home: &Path, args: &[&str]) -> Value {
    let output = rl_command(home)
        .env_remove("RL_HOME")
        .arg("--home")
        .arg(home)
        .args(args)
        .arg("--json")
        .output()
        .unwrap();
    crate::success_json(args, &output)
}

impl Server {
    pub(crate) fn start(home: tempfile::TempDir, extra: &[&str], env: &[(&str, &str)]) -> Self {
        let mut args = vec!["--addr", "127.0.0.1:0"];
        args.extend_from_slice(extra);
        let command = serve_command(home.path(), &args, env);
        Self::spawn(command, home)
    }

    /// With `--home DIR` and no `RL_HOME`.
    pub(crate) fn start_with_home_flag(
        home: tempfile::TempDir,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Self {
        let mut args = vec!["--addr", "127.0.0.1:0"];
        args.extend_from_slice(extra);
        let mut command = serve_command(home.path(), &args, env);
        command.env_remove("RL_HOME").arg("--home").arg(home.path());
        Self::spawn(command, home)
    }

    pub(crate) fn spawn(mut command: Command, home: tempfile::TempDir) -> Self {
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let output = Arc::new(Mutex::new(String::new()));
        let (lines, first_lines) = mpsc::channel::<String>();
        let stdout = child.stdout.take().unwrap();
        let stderr = child.stderr.take().unwrap();
        let mut readers = Vec::new();
        for (stream, lines) in [
            (Box::new(stdout) as Box<dyn Read + Send>, None),
            (Box::new(stderr), Some(lines)),
        ] {
            let output = Arc::clone(&output);
            readers.push(std::thread::spawn(move || {
                for line in BufReader::new(stream).lines() {
                    let Ok(line) = line else { break };
                    output.lock().unwrap().push_str(&format!("{line}\n"));
                    if let Some(lines) = &lines {
                        let _ = lines.send(line);
                    }
                }
            }));
        }
        let started = Instant::now();
        let address = loop {
            let left = Duration::from_secs(60).saturating_sub(started.elapsed());
            if let Ok(line) = first_lines.recv_timeout(left) {
                if let Some(rest) = line.split("listening on http://").nth(1) {
                    let address = rest.split_whitespace().next().unwrap();
                    break address.parse::<SocketAddr>().unwrap();
                }
            } else {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "rl serve never said where it listens: {}",
                    output.lock().unwrap()
                );
            }
        };
        Self {
            child,
            address,
            output,
            readers,
            home,
            token: None,
        }
    }

    pub(crate) fn output(&self) -> String {
        self.output.lock().unwrap().clone()
    }

    /// A request with the server's token, if it has one; `body` is sent as JSON.
    pub(crate) fn request(&self, method: &str, path: &str, body: Option<&str>) -> Answer {
        let mut headers = Vec::new();
        let authorization = self.token.as_ref().map(|token| format!("Bearer {token}"));
        if let Some(authorization) = &authorization {
            headers.push(("Authorization", authorization.as_str()));
        }
        if body.is_some() {
            headers.push(("Content-Type", "application/json"));
        }
        self.raw(method, path, &headers, body.unwrap_or_default())
    }

    pub(crate) fn get(&self, path: &str) -> Answer {
        self.request("GET", path, None)
    }

    pub(crate) fn post(&self, path: &str, body: &Value) -> Answer {
        self.request("POST", path, Some(&body.to_string()))
    }

    /// A request exactly as given (no token added; `Host` the address listened on unless
    /// `headers` has one); the answer must be JSON.
    pub(crate) fn raw(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Answer {
        let (status, headers, body) = self.exchange(method, path, headers, body);
        assert!(
            headers.contains("content-type: application/json"),
            "{method} {path}: {status} is not JSON: {headers}\n{body}"
        );
        let body = serde_json::from_str(&body)
            .unwrap_or_else(|error| panic!("{method} {path}: {error}: {body:?}"));
        Answer {
            status,
            headers,
            body,
        }
    }

    /// Its state directory.
    pub(crate) fn home(&self) -> &Path {
        self.home.path()
    }

    /// The address it listens on.
    pub(crate) fn address(&self) -> SocketAddr {
        self.address
    }

    /// The server's highest resident memory so far, in bytes (`VmHWM`).
    pub(crate) fn peak_memory(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let kilobytes = status
            .lines()
            .find_map(|line| line.strip_prefix("VmHWM:"))
            .and_then(|rest| {
                rest.trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
            .unwrap_or_else(|| panic!("no VmHWM in {status}"));
        kilobytes * 1024
    }

    /// The base of the server's addresses, `http://127.0.0.1:PORT`.
    pub(crate) fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// A request exactly as given: the status, the header block (lower-cased) and the body.
    pub(crate) fn exchange(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> (u16, String, String) {
        let mut stream = TcpStream::connect_timeout(&self.address, Duration::from_secs(10))
            .unwrap_or_else(|error| panic!("cannot connect: {error}\n{}", self.output()));
        stream.set_read_timeout(Some(ANSWER_TIMEOUT)).unwrap();
        stream
            .set_write_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut request = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
        if !headers
            .iter()
            .any(|(name, _)| name.eq_ignore_ascii_case("host"))
        {
            request.push_str(&format!("Host: {}\r\n", self.address));
        }
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        if !body.is_empty() || method == "POST" {
            request.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        request.push_str("\r\n");
        request.push_str(body);
        stream.write_all(request.as_bytes()).unwrap();
        let mut bytes = Vec::new();
        stream.read_to_end(&mut bytes).unwrap_or_else(|error| {
            panic!("{method} {path}: no answer: {error}\n{}", self.output())
        });
        let text = String::from_utf8(bytes).unwrap();
        let (head, body) = text
            .split_once("\r\n\r\n")
            .unwrap_or_else(|| panic!("{method} {path}: not HTTP: {text:?}"));
        let status: u16 = head.split_whitespace().nth(1).unwrap().parse().unwrap();
        let headers = head.to_ascii_lowercase();
        assert!(
            !headers.contains("transfer-encoding: chunked"),
            "{method} {path}: chunked answers are not read here: {head}"
        );
        (status, headers, body.to_owned())
    }

    /// SIGTERM, then the exit status, within a bound; by then `output` holds all it wrote.
    pub(crate) fn terminate(&mut self) -> ExitStatus {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(self.child.id()).unwrap());
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
        let status = wait_bounded(&mut self.child, Duration::from_secs(30))
            .unwrap_or_else(|| panic!("rl serve did not stop on SIGTERM: {}", self.output()));
        // An exited process's last lines may still be in the pipes, not yet copied.
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self
            .readers
            .iter()
            .all(std::thread::JoinHandle::is_finished)
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(10));
        }
        status
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn wait_bounded(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let started = Instant::now();
    while started.elapsed() < limit {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

/// Asserts the status, and hands back the body.
#[track_caller]
pub(crate) fn expect(answer: Answer, status: u16) -> Value {
    assert_eq!(answer.status, status, "{}", answer.body);
    if status != 200 {
        assert!(answer.body["error"].is_string(), "{}", answer.body);
    }
    answer.body
}

pub(crate) fn error_of(body: &Value) -> &str {
    body["error"].as_str().unwrap()
}

/// One of `GET /config`'s `configurable_fields`.
fn field(server: &Server, name: &str) -> Value {
    let config = expect(server.get("/config"), 200);
    config["configurable_fields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|field| field["name"] == name)
        .unwrap_or_else(|| panic!("no field {name}: {config}"))
        .clone()
}

fn fixture_tree() -> String {
    workspace_root()
        .join("fixtures/tinker-atropos")
        .display()
        .to_string()
}

/// A state directory with the local stack's settings (and `extra` TOML).
pub(crate) fn stack_home(python: &Path, extra: &str) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    let settings = rl_test_support::local_stack_settings(python) + extra;
    std::fs::write(home.path().join("config.toml"), settings).unwrap();
    home
}

/// Runs started by a test, stopped with `rl runs stop` even when it panics.
pub(crate) struct StartedRuns<'a> {
    pub(crate) home: &'a Path,
    pub(crate) ids: Vec<String>,
}

impl Drop for StartedRuns<'_> {
    fn drop(&mut self) {
        for id in &self.ids {
            let _ = crate::rl_in(self.home, &["runs", "stop", id, "--json"]);
        }
    }
}

#[test]
fn every_route_answers_json_and_errors_have_their_status() {
    let tree = fixture_tree();
    let mut server = Server::start(
        tempfile::tempdir().unwrap(),
        &[],
        &[("RL_TINKER_ATROPOS_ROOT", tree.as_str())],
    );

    let health = expect(server.get("/health"), 200);
    assert!(health["healthy"].is_boolean(), "{health}");

    let environments = expect(server.get("/environments"), 200);
    let names: Vec<&str> = environments
        .as_array()
        .unwrap()
        .iter()
        .map(|env| env["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"word_ladder"), "{names:?}");

    // Nothing selected yet: a precondition, 409.
    let nothing = expect(server.get("/config"), 409);
    assert!(
        nothing["hint"]
            .as_str()
            .unwrap()
            .contains("rl_select_environment")
    );

    let unknown = expect(
        server.request("POST", "/environments/gsm8k/select", None),
        404,
    );
    assert!(
        unknown["available"]
            .as_array()
            .unwrap()
            .contains(&json!("word_ladder")),
        "{unknown}"
    );
    let selected = expect(
        server.request("POST", "/environments/word_ladder/select", None),
        200,
    );
    assert_eq!(selected["environment"], "word_ladder");
    assert!(
        std::path::Path::new(selected["file_path"].as_str().unwrap())
            .extension()
            .is_some_and(|extension| extension == "py")
    );
    // The original client's `{}`-less POST, and an explicit `{}`, are the same; more is not.
    expect(
        server.post("/environments/word_ladder/select", &json!({})),
        200,
    );
    expect(
        server.post("/environments/word_ladder/select", &json!({"name": "x"})),
        400,
    );

    let config = expect(server.get("/config"), 200);
    assert_eq!(config["environment"], "word_ladder");
    assert!(config["configurable_fields"].as_array().unwrap().len() > 1);
    let edited = expect(
        server.post("/config", &json!({"field": "group_size", "value": "12"})),
        200,
    );
    assert_eq!(edited["value"], 12, "{edited}");
    assert_eq!(field(&server, "group_size")["current_value"], 12);
    let bad_value = expect(
        server.post("/config", &json!({"field": "group_size", "value": "many"})),
        400,
    );
    assert!(!bad_value["expected"].is_null(), "{bad_value}");
    let bad_field = expect(
        server.post("/config", &json!({"field": "no_such_field", "value": 1})),
        400,
    );
    assert!(bad_field["available_fields"].is_array(), "{bad_field}");
    expect(server.post("/config", &json!({"field": "group_size"})), 400);

    // Bodies that are not JSON, or not sent as JSON.
    let malformed = expect(server.request("POST", "/config", Some("{\"field\": ")), 400);
    assert!(
        error_of(&malformed).contains("not valid JSON"),
        "{malformed}"
    );
    // What a browser sends cross-site without asking first (no content type, a form's,
    // text/plain) is refused with 415, body or not, and changes nothing.
    let edit = r#"{"field": "group_size", "value": 3}"#;
    for (kind, body) in [
        (None, edit),
        (Some("text/plain"), edit),
        (
            Some("application/x-www-form-urlencoded"),
            "field=group_size&value=3",
        ),
        (Some("multipart/form-data; boundary=x"), ""),
    ] {
        let headers: Vec<(&str, &str)> = kind
            .map(|kind| ("Content-Type", kind))
            .into_iter()
            .collect();
        let refused = expect(server.raw("POST", "/config", &headers, body), 415);
        assert!(
            error_of(&refused).contains("content type"),
            "{kind:?}: {refused}"
        );
    }
    let bare = expect(server.raw("POST", "/runs", &[], ""), 415);
    assert!(error_of(&bare).contains("no content type"), "{bare}");
    expect(
        server.raw("POST", "/runs", &[("Content-Type", "text/plain")], "{}"),
        415,
    );
    assert_eq!(field(&server, "group_size")["current_value"], 12);
    // The routes whose arguments are in the path take an empty body whatever its content type
    // (the original client's `json=None` is aiohttp's octet-stream with no body), else JSON.
    let select = "/environments/word_ladder/select";
    expect(server.raw("POST", select, &[], "{}"), 415);
    expect(
        server.raw("POST", select, &[("Content-Type", "text/plain")], "{}"),
        415,
    );
    for kind in ["application/octet-stream", "text/plain"] {
        expect(
            server.raw("POST", select, &[("Content-Type", kind)], ""),
            200,
        );
    }
    expect(
        server.raw(
            "POST",
            select,
            &[("Content-Type", "application/json; charset=utf-8")],
            "",
        ),
        200,
    );
    expect(
        server.raw(
            "POST",
            "/runs/0badc0de/stop",
            &[("Content-Type", "application/octet-stream")],
            "",
        ),
        404,
    );
    expect(
        server.raw(
            "POST",
            "/runs/0badc0de/stop",
            &[("Content-Type", "application/octet-stream")],
            "x",
        ),
        415,
    );
    expect(server.request("POST", "/runs", Some("[1, 2")), 400);
    // Bodies are limited to 1 MiB: one byte more is refused before it is read as JSON.
    let json_type = [("Content-Type", "application/json")];
    let at_limit = expect(
        server.raw("POST", "/config", &json_type, &"x".repeat(1 << 20)),
        400,
    );
    assert!(error_of(&at_limit).contains("not valid JSON"), "{at_limit}");
    let too_large = expect(
        server.raw("POST", "/config", &json_type, &"x".repeat((1 << 20) + 1)),
        413,
    );
    assert!(error_of(&too_large).contains("larger than"), "{too_large}");

    let runs = expect(server.get("/runs"), 200);
    assert_eq!(
        (runs["runs"].clone(), runs["count"].clone()),
        (json!([]), json!(0))
    );
    // word_ladder with the default settings needs TINKER_API_KEY, which is not set: refused
    // before anything starts, as a precondition. `{}` and an empty JSON body are the same.
    let refused = expect(server.post("/runs", &json!({})), 409);
    assert_eq!(refused["missing_key"], "TINKER_API_KEY", "{refused}");
    expect(server.raw("POST", "/runs", &json_type, ""), 409);
    expect(server.post("/runs", &json!({"environment": "x"})), 400);

    // The agent's job's routes (issue 55): a wait of an unknown run, an export of one, a
    // stop of an unknown test; a wait shorter than a wait is a bad request.
    expect(server.get("/runs/0badc0de/wait?timeout_seconds=1"), 400);
    expect(server.request("POST", "/test/0badc0de/stop", None), 404);
    for (method, path) in [
        ("GET", "/runs/0badc0de"),
        ("POST", "/runs/0badc0de/stop"),
        ("GET", "/runs/0badc0de/metrics"),
        ("GET", "/runs/0badc0de/wait?timeout_seconds=10"),
        ("POST", "/runs/0badc0de/export"),
    ] {
        let unknown = expect(server.request(method, path, None), 404);
        assert_eq!(unknown["active_runs"], json!([]), "{path}: {unknown}");
    }
    for path in [
        "/runs/..%2Fx",
        "/runs/..%2F..%2Fetc",
        "/runs/0BADC0DE",
        "/runs/..%2Fx/metrics",
    ] {
        let bad = expect(server.get(path), 400);
        assert!(
            error_of(&bad).contains("8 lowercase hexadecimal"),
            "{path}: {bad}"
        );
    }
    expect(server.request("POST", "/runs/..%2Fx/stop", None), 400);
    expect(server.get("/runs/0badc0de?since=-1"), 400);
    expect(server.get("/runs/0badc0de?until=3"), 400);

    // The pre-flight's body checks come before anything runs.
    let mixed = expect(
        server.post(
            "/test/inference",
            &json!({"prompts": ["1+1?"], "num_steps": 2}),
        ),
        400,
    );
    assert!(error_of(&mixed).contains("mixes"), "{mixed}");
    let unknown_key = expect(server.post("/test/inference", &json!({"steps": 2})), 400);
    assert!(error_of(&unknown_key).contains("steps"), "{unknown_key}");
    expect(
        server.post("/test/inference", &json!({"prompts": "1+1?"})),
        400,
    );
    // OpenRouter by default, whose key is not set.
    let no_key = expect(server.post("/test/inference", &json!({})), 409);
    assert_eq!(no_key["missing_key"], "OPENROUTER_API_KEY", "{no_key}");

    for path in ["/", "/nope", "/runs/0badc0de/stop/now", "/environments/x"] {
        let missing = expect(server.get(path), 404);
        assert!(
            missing["routes"]
                .as_array()
                .unwrap()
                .contains(&json!("GET /health")),
            "{path}: {missing}"
        );
        assert!(missing["hint"].as_str().unwrap().contains("POST /runs"));
    }
    for (method, path) in [
        ("DELETE", "/runs"),
        ("GET", "/runs/0badc0de/stop"),
        ("PUT", "/config"),
        ("GET", "/test/inference"),
        ("POST", "/health"),
    ] {
        let wrong = expect(server.request(method, path, None), 405);
        assert!(!wrong["allowed"].as_array().unwrap().is_empty(), "{wrong}");
    }

    let status = server.terminate();
    assert!(status.success(), "{status}: {}", server.output());
    assert!(server.output().contains("rl serve: stopping"));
}

/// What a page on another site can make a browser send is refused with 403 and changes
/// nothing: an `Origin` other than the server's, `Sec-Fetch-Site` other than same-origin, a
/// `Host` that is not this server (DNS rebinding). The original client's requests still work.
/// What the original (seed 001) HTTP client sees, route by route, success and error: status and
/// body, with the machine's paths and the selection's time stamp replaced. The contract the
/// split of `serve` and the answers' move to rl-tools keep.
#[test]
fn the_original_clients_routes_answer_as_before() {
    let tree = fixture_tree();
    let server = Server::start(
        tempfile::tempdir().unwrap(),
        &[],
        &[("RL_TINKER_ATROPOS_ROOT", tree.as_str())],
    );
    let home = server.home.path().display().to_string();
    let workspace = workspace_root().display().to_string();
    let old_inference = json!({"prompts": ["2+2?"], "max_tokens": 5, "temperature": 0.0});
    // `GET /health` is left out: what it finds is the machine's.
    let exchanges: Vec<(&str, &str, Option<Value>)> = vec![
        ("GET", "/environments", None),
        ("GET", "/config", None),
        ("POST", "/environments/gsm8k/select", None),
        ("POST", "/environments/word_ladder/select", None),
        ("GET", "/config", None),
        (
            "POST",
            "/config",
            Some(json!({"field": "group_size", "value": "12"})),
        ),
        (
            "POST",
            "/config",
            Some(json!({"field": "group_size", "value": "many"})),
        ),
        (
            "POST",
            "/config",
            Some(json!({"field": "no_such_field", "value": 1})),
        ),
        ("POST", "/config", Some(json!({"field": "group_size"}))),
        ("GET", "/runs", None),
        ("GET", "/runs/0badc0de", None),
        ("GET", "/runs/not-a-run", None),
        ("POST", "/runs/0badc0de/stop", None),
        ("GET", "/runs/0badc0de/metrics", None),
        ("POST", "/runs", Some(json!({}))),
        ("POST", "/test/inference", Some(old_inference)),
        ("POST", "/test/inference", Some(json!({"num_steps": 1000}))),
        ("GET", "/no/such/route", None),
        ("DELETE", "/runs", None),
    ];
    let mut seen = vec![];
    for (method, path, body) in exchanges {
        let body_text = body.as_ref().map(Value::to_string);
        let answer = server.request(method, path, body_text.as_deref());
        let answer = rl_test_support::scrub_strings(answer_json(&answer), &|text| {
            rl_test_support::without_stamps(
                &text
                    .replace(&home, "[home]")
                    .replace(&workspace, "[workspace]"),
            )
        });
        seen.push(json!({"request": format!("{method} {path}"), "body": body, "answer": answer}));
    }
    insta::assert_json_snapshot!(seen, {
        "[].answer.body.selected_at" => "[time]",
    });
}

fn answer_json(answer: &Answer) -> Value {
    json!({"status": answer.status, "body": answer.body})
}

#[test]
fn browsers_on_other_sites_are_refused() {
    let tree = fixture_tree();
    let server = Server::start(
        tempfile::tempdir().unwrap(),
        &[],
        &[("RL_TINKER_ATROPOS_ROOT", tree.as_str())],
    );
    let port = server.address.port();
    let own = format!("http://{}", server.address);
    let json_type = ("Content-Type", "application/json");

    // The original client (aiohttp): `json=None` for select and stop (aiohttp then sends an
    // octet-stream content type and no body), `json=data` otherwise.
    let octet_stream = ("Content-Type", "application/octet-stream");
    let aiohttp = [
        ("Accept", "*/*"),
        ("Accept-Encoding", "gzip, deflate"),
        ("User-Agent", "Python/3.11 aiohttp/3.9.5"),
    ];
    let with = |extra: &[(&'static str, &'static str)]| -> Vec<(&'static str, &'static str)> {
        aiohttp.iter().chain(extra).copied().collect()
    };
    let selected = expect(
        server.raw(
            "POST",
            "/environments/word_ladder/select",
            &with(&[octet_stream]),
            "",
        ),
        200,
    );
    assert_eq!(selected["environment"], "word_ladder");
    let edited = expect(
        server.raw(
            "POST",
            "/config",
            &with(&[json_type]),
            r#"{"field": "group_size", "value": 12}"#,
        ),
        200,
    );
    assert_eq!(edited["value"], 12, "{edited}");
    let started = expect(server.raw("POST", "/runs", &with(&[json_type]), "{}"), 409);
    assert_eq!(started["missing_key"], "TINKER_API_KEY", "{started}");
    expect(
        server.raw("POST", "/runs/0badc0de/stop", &with(&[octet_stream]), ""),
        404,
    );
    expect(server.raw("GET", "/health", &with(&[]), ""), 200);

    // The reproduced attacks: a page at evil.example edits, selects, starts.
    let evil = ("Origin", "https://evil.example");
    let edit = r#"{"field": "group_size", "value": 3}"#;
    for (method, path, headers, body) in [
        ("POST", "/config", vec![evil], edit),
        (
            "POST",
            "/config",
            vec![evil, ("Content-Type", "text/plain")],
            edit,
        ),
        ("POST", "/config", vec![evil, json_type], edit),
        ("POST", "/runs", vec![evil], ""),
        ("POST", "/runs", vec![evil, json_type], "{}"),
        ("POST", "/environments/arithmetic/select", vec![evil], ""),
        (
            "POST",
            "/environments/arithmetic/select",
            vec![evil, ("Content-Type", "text/plain")],
            "",
        ),
        ("GET", "/config", vec![evil], ""),
        (
            "OPTIONS",
            "/config",
            vec![evil, ("Access-Control-Request-Method", "POST")],
            "",
        ),
        ("POST", "/config", vec![("Origin", "null"), json_type], edit),
        // Another port of the same machine is another origin.
        (
            "POST",
            "/config",
            vec![("Origin", "http://127.0.0.1:1"), json_type],
            edit,
        ),
    ] {
        let refused = expect(server.raw(method, path, &headers, body), 403);
        let error = error_of(&refused);
        assert!(
            error.contains("refused"),
            "{method} {path} {headers:?}: {refused}"
        );
        assert!(refused["hint"].is_string(), "{refused}");
    }
    // Sec-Fetch-Site: what a browser says of the page that makes the request.
    for site in ["cross-site", "same-site"] {
        let headers = [("Sec-Fetch-Site", site), json_type];
        let refused = expect(server.raw("POST", "/config", &headers, edit), 403);
        assert!(error_of(&refused).contains(site), "{refused}");
        expect(
            server.raw("POST", "/runs", &[("Sec-Fetch-Site", site)], ""),
            403,
        );
    }
    // DNS rebinding: a name the page owns, pointed at 127.0.0.1.
    let rebound = format!("evil.example:{port}");
    for host in [
        "evil.example",
        rebound.as_str(),
        "127.0.0.1.evil.example",
        "localhost@evil.example",
    ] {
        let headers = [("Host", host), json_type];
        let refused = expect(server.raw("POST", "/config", &headers, edit), 403);
        assert!(error_of(&refused).contains(host), "{refused}");
        expect(server.raw("GET", "/health", &[("Host", host)], ""), 403);
    }
    let rebound_origin = format!("http://{rebound}");
    expect(
        server.raw(
            "POST",
            "/config",
            &[("Host", &rebound), ("Origin", &rebound_origin), json_type],
            edit,
        ),
        403,
    );
    let config = expect(server.get("/config"), 200);
    assert_eq!(config["environment"], "word_ladder", "{config}");
    assert_eq!(field(&server, "group_size")["current_value"], 12);
    assert_eq!(expect(server.get("/runs"), 200)["count"], 0);

    // The server's own names, and its own origin, are answered.
    let localhost = format!("localhost:{port}");
    let ipv6 = format!("[::1]:{port}");
    for host in [localhost.as_str(), "LOCALHOST", "127.0.0.1", ipv6.as_str()] {
        expect(server.raw("GET", "/health", &[("Host", host)], ""), 200);
    }
    for site in ["same-origin", "none"] {
        expect(
            server.raw("GET", "/config", &[("Sec-Fetch-Site", site)], ""),
            200,
        );
    }
    let same_origin = [
        ("Origin", own.as_str()),
        ("Sec-Fetch-Site", "same-origin"),
        json_type,
    ];
    let edited = expect(
        server.raw(
            "POST",
            "/config",
            &same_origin,
            r#"{"field": "group_size", "value": 4}"#,
        ),
        200,
    );
    assert_eq!(edited["value"], 4, "{edited}");
    let localhost_origin = format!("http://{localhost}");
    expect(
        server.raw(
            "POST",
            "/config",
            &[
                ("Host", &localhost),
                ("Origin", &localhost_origin),
                json_type,
            ],
            edit,
        ),
        200,
    );
    // An origin is the whole scheme://host:port: the server's address under another name is
    // another origin.
    expect(
        server.raw(
            "POST",
            "/config",
            &[("Origin", &localhost_origin), json_type],
            edit,
        ),
        403,
    );
}

#[test]
fn unsafe_addresses_and_missing_tokens_are_refused() {
    let home = tempfile::tempdir().unwrap();
    let refused = |args: &[&str], env: &[(&str, &str)]| {
        let mut child = serve_command(home.path(), args, env)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let Some(status) = wait_bounded(&mut child, Duration::from_secs(30)) else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("rl serve {args:?} started instead of refusing");
        };
        let mut stderr = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        assert_eq!(status.code(), Some(1), "{args:?}: {stderr}");
        stderr
    };
    let remote = refused(&["--addr", "0.0.0.0:0"], &[]);
    assert!(remote.contains("--allow-remote"), "{remote}");
    let no_token = refused(&["--addr", "0.0.0.0:0", "--allow-remote"], &[]);
    assert!(no_token.contains("--token-env"), "{no_token}");
    let unset = refused(
        &["--addr", "127.0.0.1:0", "--token-env", "RL_NO_SUCH_TOKEN"],
        &[],
    );
    assert!(
        unset.contains("RL_NO_SUCH_TOKEN") && unset.contains("not set"),
        "{unset}"
    );
    let empty = refused(
        &["--addr", "127.0.0.1:0", "--token-env", "RL_EMPTY_TOKEN"],
        &[("RL_EMPTY_TOKEN", "")],
    );
    assert!(empty.contains("empty"), "{empty}");
    let nonsense = refused(&["--addr", "not an address"], &[]);
    assert!(nonsense.contains("HOST:PORT"), "{nonsense}");
}

#[test]
fn a_token_guards_every_route_and_is_never_shown() {
    const TOKEN: &str = "rl-serve-test-token-7f3a9c21e5";
    let tree = fixture_tree();
    let mut server = Server::start(
        tempfile::tempdir().unwrap(),
        &["--token-env", "RL_SERVE_TEST_TOKEN"],
        &[
            ("RL_TINKER_ATROPOS_ROOT", tree.as_str()),
            ("RL_SERVE_TEST_TOKEN", TOKEN),
        ],
    );
    for path in ["/health", "/environments", "/runs", "/nope"] {
        let missing = server.raw("GET", path, &[], "");
        assert!(
            missing.headers.contains("www-authenticate: bearer"),
            "{missing:?}"
        );
        expect(missing, 401);
        let wrong = server.raw(
            "GET",
            path,
            &[("Authorization", "Bearer rl-serve-test-token-7f3a9c21e6")],
            "",
        );
        expect(wrong, 401);
        let truncated = server.raw(
            "GET",
            path,
            &[("Authorization", "Bearer rl-serve-test")],
            "",
        );
        expect(truncated, 401);
        let basic = server.raw("GET", path, &[("Authorization", TOKEN)], "");
        expect(basic, 401);
    }
    expect(server.request("POST", "/runs", None), 401);
    server.token = Some(TOKEN.to_owned());
    expect(server.get("/health"), 200);
    let environments = expect(server.get("/environments"), 200);
    assert!(environments.as_array().unwrap().len() > 1);
    expect(server.get("/runs"), 200);
    expect(server.get("/nope"), 404);
    let lower = server.raw(
        "GET",
        "/runs",
        &[("authorization", &format!("bearer {TOKEN}"))],
        "",
    );
    expect(lower, 200);
    // A token does not open the server to other names, nor to other sites' pages.
    let bearer = format!("Bearer {TOKEN}");
    let authorized = ("Authorization", bearer.as_str());
    expect(
        server.raw(
            "GET",
            "/health",
            &[authorized, ("Host", "evil.example")],
            "",
        ),
        403,
    );
    expect(
        server.raw(
            "GET",
            "/health",
            &[authorized, ("Origin", "https://evil.example")],
            "",
        ),
        403,
    );

    server.terminate();
    let output = server.output();
    assert!(output.contains("RL_SERVE_TEST_TOKEN"), "{output}");
    assert!(!output.contains(TOKEN), "the token was printed: {output}");

    // `--allow-remote` (here on loopback) with a token answers any name, behind a proxy say;
    // other sites' pages are still refused.
    let mut remote = Server::start(
        tempfile::tempdir().unwrap(),
        &["--allow-remote", "--token-env", "RL_SERVE_TEST_TOKEN"],
        &[
            ("RL_TINKER_ATROPOS_ROOT", tree.as_str()),
            ("RL_SERVE_TEST_TOKEN", TOKEN),
        ],
    );
    let proxied = [authorized, ("Host", "rl.example.org")];
    expect(remote.raw("GET", "/health", &proxied, ""), 200);
    expect(
        remote.raw("GET", "/health", &[("Host", "rl.example.org")], ""),
        401,
    );
    let same_origin = [
        authorized,
        ("Host", "rl.example.org"),
        ("Origin", "https://rl.example.org"),
    ];
    expect(remote.raw("GET", "/health", &same_origin, ""), 200);
    let cross = [
        authorized,
        ("Host", "rl.example.org"),
        ("Origin", "https://evil.example"),
    ];
    expect(remote.raw("GET", "/health", &cross, ""), 403);
    remote.terminate();
}
