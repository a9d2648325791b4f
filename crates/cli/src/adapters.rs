//! `mmc adapters`: deploy, roll back and list adapters through a running
//! server's admin API; scaffold a new one in a checkout; run the contract
//! suite on a compiled one in a sandbox.

use super::*;

#[derive(Subcommand)]
pub enum AdaptersCommand {
    /// Upload a new version of adapter NAME to a running server (hot swap).
    Deploy {
        name: String,
        file: PathBuf,
        #[command(flatten)]
        server: AdminServer,
    },
    /// Go back to the previous version of adapter NAME.
    Rollback {
        name: String,
        #[command(flatten)]
        server: AdminServer,
    },
    /// List the adapters a running server serves, with their versions.
    List {
        #[command(flatten)]
        server: AdminServer,
    },
    /// Scaffold adapter NAME in a checkout of this repository: the adapter,
    /// its fake operator and its tests (docs/adapters.md).
    New {
        name: String,
        /// The adapter's language: rust or python.
        #[arg(long)]
        lang: String,
        /// The repository's root.
        #[arg(long, default_value = ".")]
        root: PathBuf,
    },
    /// Run the adapter contract suite on FILE in a sandbox; prints a pass/fail table.
    Test {
        file: PathBuf,
        /// A setting given to the adapter, KEY=VALUE (repeatable), e.g. --setting operators=mtn-bj
        #[arg(long = "setting", value_parser = key_value)]
        settings: Vec<(String, String)>,
        /// A secret given to the adapter, KEY=VALUE (repeatable).
        #[arg(long = "secret", value_parser = key_value)]
        secrets: Vec<(String, String)>,
        #[arg(long)]
        json: bool,
    },
}

#[derive(clap::Args)]
pub struct AdminServer {
    /// Base URL of the running server's admin listener (`admin.listen`).
    #[arg(long, env = "MMC_ADMIN_URL", default_value = "http://127.0.0.1:9090")]
    server: String,
    /// The admin token: `admin.token` in the configuration, or the one
    /// generated into `<data_dir>/admin_token` (read from there when omitted).
    #[arg(long, env = "MMC_ADMIN_TOKEN")]
    token: Option<String>,
    /// Output is always one JSON object; accepted for scripts that pass it.
    #[arg(long)]
    json: bool,
}

pub fn run(config: &Config, command: AdaptersCommand) {
    match command {
        AdaptersCommand::Deploy { name, file, server } => {
            let bytes = std::fs::read(&file)
                .unwrap_or_else(|e| fail(&format!("cannot read {}: {e}", file.display())));
            admin_call(
                config,
                &server,
                reqwest::Method::PUT,
                format!("/admin/v1/adapters/{name}"),
                Some(bytes),
            );
        }
        AdaptersCommand::Rollback { name, server } => admin_call(
            config,
            &server,
            reqwest::Method::POST,
            format!("/admin/v1/adapters/{name}/rollback"),
            None,
        ),
        AdaptersCommand::List { server } => admin_call(
            config,
            &server,
            reqwest::Method::GET,
            "/admin/v1/adapters".into(),
            None,
        ),
        AdaptersCommand::New { name, lang, root } => {
            let lang: mmc_scaffold::Lang = lang.parse().unwrap_or_else(|e| fail(&format!("{e}")));
            let done = mmc_scaffold::new_adapter(&root, &name, lang)
                .unwrap_or_else(|e| fail(&format!("{e}")));
            println!(
                "{}",
                json!({"adapter": name, "created": done.created, "edited": done.edited,
                       "next_steps": done.next_steps})
            );
        }
        AdaptersCommand::Test {
            file,
            settings,
            secrets,
            json,
        } => test(config, file, settings, secrets, json),
    }
}

/// One request to the admin API; its JSON answer printed, or on a refusal
/// written to stderr with exit status 2.
fn admin_call(
    config: &Config,
    server: &AdminServer,
    method: reqwest::Method,
    path: String,
    body: Option<Vec<u8>>,
) {
    let body = body.map(|b| ("application/wasm", b));
    println!("{}", admin_request(config, server, method, path, body));
}

/// One call to a running server's admin API: its JSON answer, or the
/// process ends (status 2) printing the error the server gave.
pub(super) fn admin_request(
    config: &Config,
    server: &AdminServer,
    method: reqwest::Method,
    path: String,
    body: Option<(&str, Vec<u8>)>,
) -> serde_json::Value {
    let token = server.token.clone().unwrap_or_else(|| {
        let path = config.admin_token_path();
        std::fs::read_to_string(&path)
            .map(|t| t.trim().to_string())
            .unwrap_or_else(|e| {
                fail(&format!(
                    "no --token given and {} cannot be read: {e}",
                    path.display()
                ))
            })
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    rt.block_on(async {
        let client = reqwest::Client::new();
        let mut req = client
            .request(
                method,
                format!("{}{path}", server.server.trim_end_matches('/')),
            )
            .bearer_auth(&token);
        if let Some((content_type, b)) = body {
            req = req.header("content-type", content_type).body(b);
        }
        let resp = req
            .send()
            .await
            .unwrap_or_else(|e| fail(&format!("cannot reach {}: {e}", server.server)));
        let ok = resp.status().is_success();
        let body: serde_json::Value = resp.json().await.unwrap_or_else(|e| fail(&e.to_string()));
        if !ok {
            eprintln!("{body}");
            std::process::exit(2);
        }
        body
    })
}

/// `mmc reconcile`: the day run on the server; with `--account`, its one
/// report, else every account's.
pub fn reconcile(config: &Config, server: &AdminServer, date: &str, account: Option<&str>) {
    let body = json!({"date": date, "account": account});
    let answer = admin_request(
        config,
        server,
        reqwest::Method::POST,
        "/admin/v1/reconciliation/runs".into(),
        Some(("application/json", body.to_string().into_bytes())),
    );
    match (account, answer["data"].as_array().map(Vec::as_slice)) {
        (Some(_), Some([report])) => println!("{report}"),
        _ => println!("{answer}"),
    }
}

/// The contract suite on a compiled adapter: a table, or JSON; exit status 1
/// when a check fails.
fn test(
    config: &Config,
    file: PathBuf,
    settings: Vec<(String, String)>,
    secrets: Vec<(String, String)>,
    json: bool,
) {
    let inputs = mmc_sandbox::conformance::Inputs { settings, secrets };
    let checks = mmc_sandbox::conformance::run(&file, &config.cache_dir(), &inputs)
        .unwrap_or_else(|e| fail(&format!("{e:#}")));
    let passed = checks.iter().all(|c| c.passed);
    if json {
        println!(
            "{}",
            json!({"file": file, "passed": passed, "checks": checks})
        );
    } else {
        print!("{}", mmc_sandbox::conformance::table(&checks));
    }
    if !passed {
        std::process::exit(1);
    }
}

fn key_value(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .ok_or_else(|| format!("expected KEY=VALUE, got {s}"))
}
