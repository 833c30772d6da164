//! `warden conformance-client URL`: Warden's HTTP client driven by the official MCP
//! conformance suite (`@modelcontextprotocol/conformance`, see scripts/conformance).
//!
//! The suite starts a mock server, runs this command with the server URL last, and names
//! the scenario in `MCP_CONFORMANCE_SCENARIO`, the wire revision in
//! `MCP_CONFORMANCE_PROTOCOL_VERSION` (2026-07-28 means the stateless era, anything older
//! the `initialize` handshake) and scenario data in `MCP_CONFORMANCE_CONTEXT`. The verdict
//! comes from what the mock server observed; the exit code says whether the client got
//! through (0) or gave up (1).
//!
//! Every scenario runs the same exercise, so nothing here is tailored to pass a check:
//! list the tools and call each (or, when the context lists `toolCalls`, exactly those),
//! then list and read resources and list and get prompts when the server offers them.
//! Elicitation is accepted with the schema's defaults, the way a user who presses "OK"
//! would answer.
//!
//! The tools are read the way Warden reads every remote server's
//! ([`warden_mcp::http::list_tools`]) and put in Warden's catalogue (schemas compiled, names
//! qualified). The suite's schema-preservation scenario lists an echo tool
//! ([`SCHEMA_ECHO`], argument `schema`) and asks the client to send back the input schema it
//! holds for the other tool: it gets each other catalogue tool's schema exactly as a model
//! is shown it ([`warden_agent::exposure::tool_spec`]), so the suite checks what Warden
//! really holds and hands on, keyword for keyword.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Map, Value, json};
use warden_agent::exposure::tool_spec;
use warden_config::{EraPreference, HttpSettings};
use warden_host::{Catalogue, SchemaLimits};
use warden_mcp::http::{
    ClientProfile, LEGACY_VERSIONS, MODERN_VERSION, Remote, ServerRequests, Session, list_tools,
    open,
};

use crate::cli::ConformanceArgs;
use crate::exit::{Code, Failure};

/// The whole run's limit (the suite's own is 30 s).
const LIMIT: Duration = Duration::from_secs(25);
/// The tool of the suite's `json-schema-2020-12-preservation` scenario that takes another
/// tool's input schema, as the client holds it, as its `schema` argument.
const SCHEMA_ECHO: &str = "json_schema_echo";
/// The server's name in the catalogue.
const SERVER: &str = "conformance";

/// Accepts elicitation with the schema's defaults; answers roots with none.
struct Conformant;

impl ServerRequests for Conformant {
    fn answer(&self, method: &str, params: &Value) -> Result<Value, (i64, String)> {
        match method {
            "ping" => Ok(json!({})),
            "elicitation/create" => {
                let mut content = Map::new();
                let properties = params
                    .get("requestedSchema")
                    .and_then(|schema| schema.get("properties"))
                    .and_then(Value::as_object);
                for (name, property) in properties.into_iter().flatten() {
                    if let Some(default) = property.get("default") {
                        content.insert(name.clone(), default.clone());
                    }
                }
                Ok(json!({"action": "accept", "content": content}))
            }
            "roots/list" => Ok(json!({"roots": []})),
            other => Err((-32601, format!("not supported: {other}"))),
        }
    }
}

/// Runs the client against `args.url`.
pub async fn run(args: &ConformanceArgs) -> Result<Code, Failure> {
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    let version = std::env::var("MCP_CONFORMANCE_PROTOCOL_VERSION")
        .unwrap_or_else(|_| LEGACY_VERSIONS[0].into());
    let context: Value = std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or(Value::Null);
    let era = if version.as_str() >= MODERN_VERSION {
        EraPreference::Modern
    } else {
        EraPreference::Legacy
    };
    let remote = Remote {
        name: SERVER.into(),
        url: args.url.clone(),
        headers: BTreeMap::new(),
        settings: HttpSettings::default(),
        era,
        max_bytes: warden_config::DEFAULT_MAX_MESSAGE_BYTES,
        connect_timeout: Duration::from_secs(10),
        idle_timeout: Duration::from_secs(20),
        oauth: Some(oauth_client(&args.url, &context)?),
        backoff: warden_mcp::http::reconnect::Backoff::system(),
        transport: None,
    };
    // The capabilities every Warden connection declares (the default profile's).
    let profile = ClientProfile {
        requests: std::sync::Arc::new(Conformant),
        legacy_version: if era == EraPreference::Legacy {
            version.clone()
        } else {
            LEGACY_VERSIONS[0].into()
        },
        ..ClientProfile::default()
    };
    eprintln!("conformance-client: scenario {scenario:?}, protocol {version}");
    let exercise = async {
        let (session, info) = open(&remote, &profile).await?;
        eprintln!(
            "connected: {} era, protocol {}",
            if info.era == warden_mcp::Era::Modern {
                "modern"
            } else {
                "legacy"
            },
            info.protocol_version
        );
        exercise(&session, &context, &info.capabilities).await;
        session.close().await;
        Ok::<(), warden_mcp::http::HttpError>(())
    };
    match tokio::time::timeout(LIMIT, exercise).await {
        Ok(Ok(())) => Ok(Code::Ok),
        Ok(Err(error)) => Err(Failure {
            code: Code::Unavailable,
            error: anyhow::anyhow!("{error}"),
        }),
        Err(_) => Err(Failure {
            code: Code::Unavailable,
            error: anyhow::anyhow!("the scenario did not finish within {LIMIT:?}"),
        }),
    }
}

async fn exercise(session: &Session, context: &Value, capabilities: &Value) {
    // What Warden holds: the listing read as for any remote server (tools with broken
    // `x-mcp-header` annotations left out), then the catalogue built from it.
    let held = match list_tools(session, SERVER).await {
        Ok(tools) => {
            eprintln!("tools/list: ok, {} tools", tools.len());
            tools
        }
        Err(error) => {
            eprintln!("tools/list: {error}");
            Vec::new()
        }
    };
    let catalogue = Catalogue::build(
        vec![(SERVER.to_owned(), held.clone())],
        SchemaLimits::default(),
    );
    for rejected in catalogue.rejected() {
        eprintln!(
            "left out of the catalogue: {}: {}",
            rejected.name, rejected.reason
        );
    }
    let mut calls: Vec<(String, Value)> = match context.get("toolCalls").and_then(Value::as_array) {
        Some(calls) => calls
            .iter()
            .filter_map(|call| {
                let name = call.get("name")?.as_str()?.to_owned();
                Some((name, call.get("arguments").cloned().unwrap_or(json!({}))))
            })
            .collect(),
        None => held
            .iter()
            .filter(|tool| tool.name != SCHEMA_ECHO)
            .map(|tool| (tool.name.clone(), sample_arguments(&tool.input_schema)))
            .collect(),
    };
    if held.iter().any(|tool| tool.name == SCHEMA_ECHO) {
        // Each other tool's schema, as the model would be shown it.
        for tool in catalogue.tools() {
            if tool.def.name != SCHEMA_ECHO {
                let shown = tool_spec(tool).input_schema;
                calls.push((SCHEMA_ECHO.to_owned(), json!({ "schema": shown })));
            }
        }
    }
    for (name, arguments) in calls {
        let mut params = Map::new();
        params.insert("name".into(), json!(name));
        params.insert("arguments".into(), arguments);
        request(session, "tools/call", params).await;
    }
    if capabilities.get("resources").is_some()
        && let Some(result) = request(session, "resources/list", Map::new()).await
    {
        for resource in result
            .get("resources")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(uri) = resource.get("uri") {
                let mut params = Map::new();
                params.insert("uri".into(), uri.clone());
                request(session, "resources/read", params).await;
            }
        }
    }
    if capabilities.get("prompts").is_some()
        && let Some(result) = request(session, "prompts/list", Map::new()).await
    {
        for prompt in result
            .get("prompts")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(name) = prompt.get("name") {
                let mut params = Map::new();
                params.insert("name".into(), name.clone());
                let mut arguments = Map::new();
                for argument in prompt
                    .get("arguments")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    if let Some(arg) = argument.get("name").and_then(Value::as_str) {
                        arguments.insert(arg.to_owned(), json!("test"));
                    }
                }
                params.insert("arguments".into(), Value::Object(arguments));
                request(session, "prompts/get", params).await;
            }
        }
    }
}

/// The suite's Client ID Metadata Document URL (its mock authorization servers accept it
/// as a `client_id` where they advertise CIMD support).
const CONFORMANCE_CLIENT_METADATA: &str = "https://conformance-test.local/client-metadata.json";
/// The redirect URI the headless user agent registers; nothing listens there: the
/// redirect is read from the authorization endpoint's `Location`.
const CONFORMANCE_REDIRECT: &str = "http://localhost:3000/callback";

/// The OAuth client of the run: tokens in memory, a headless user agent (the suite's
/// authorization servers approve at once), the pre-registered credentials of the context
/// when it has them.
fn oauth_client(
    url: &str,
    context: &Value,
) -> Result<std::sync::Arc<warden_oauth::OAuthClient>, Failure> {
    let text = |key: &str| context.get(key).and_then(Value::as_str).map(str::to_owned);
    let preregistered = text("client_id").map(|client_id| warden_oauth::Preregistered {
        client_id,
        client_secret: text("client_secret").map(warden_oauth::Secret::new),
        issuer: text("issuer"),
        auth_method: None,
    });
    let settings = warden_oauth::ClientSettings {
        client_name: "Warden conformance client".into(),
        metadata_url: Some(CONFORMANCE_CLIENT_METADATA.into()),
        preregistered,
    };
    let failure = |error: warden_oauth::OAuthError| Failure {
        code: Code::Unavailable,
        error: anyhow::anyhow!("{error}"),
    };
    let fetcher = warden_oauth::Fetcher::new(false).map_err(failure)?;
    let agent = warden_oauth::Headless::new(fetcher, CONFORMANCE_REDIRECT);
    let client = warden_oauth::OAuthClient::new(
        "conformance",
        url,
        false,
        settings,
        std::sync::Arc::new(warden_oauth::MemoryStore::default()),
        std::sync::Arc::new(agent),
    )
    .map_err(failure)?;
    Ok(std::sync::Arc::new(client))
}

/// Sends one request, reporting (not failing on) an error.
async fn request(session: &Session, method: &str, params: Map<String, Value>) -> Option<Value> {
    match session.request(method, params, None).await {
        Ok(result) => {
            eprintln!("{method}: ok");
            Some(result)
        }
        Err(error) => {
            eprintln!("{method}: {error}");
            None
        }
    }
}

/// Arguments satisfying a tool's required properties, one plain value per type.
fn sample_arguments(schema: &Value) -> Value {
    let mut arguments = Map::new();
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let properties = schema.get("properties").and_then(Value::as_object);
    for (name, property) in properties.into_iter().flatten() {
        if !required.contains(&name.as_str()) {
            continue;
        }
        let value = match property.get("type").and_then(Value::as_str) {
            Some("integer") => json!(1),
            Some("number") => json!(2),
            Some("boolean") => json!(true),
            Some("object") => json!({}),
            Some("array") => json!([]),
            _ => json!("test"),
        };
        arguments.insert(name.clone(), value);
    }
    Value::Object(arguments)
}
