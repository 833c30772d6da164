//! Prints how the description scanner reads chosen records of a data file: every sentence
//! with its score and strongest features, and the flags. A development aid for reading a
//! false positive or a miss (decision 0027); it reads only the file named.
//!
//! Run: `cargo run -p warden-policy --example scan_explain -- FILE.jsonl ID [ID ...]`
//! (`FILE` relative to `data/scanner/` unless it is a path).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::Value;
use warden_policy::scan::model::Model;
use warden_policy::scan::{ToolText, assess, own_tool_names, unit_tokens, units_in};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (file, ids) = args.split_first().expect("FILE ID...");
    let path = if file.contains('/') {
        std::path::PathBuf::from(file)
    } else {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("data/scanner")
            .join(file)
    };
    let model = Model::builtin().unwrap();
    let records: Vec<Value> = std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let names: Vec<(String, String)> = records
        .iter()
        .map(|r| {
            (
                r["server"].as_str().unwrap_or_default().to_owned(),
                r["tool"]["name"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let catalogue: Vec<(&str, &str)> = names
        .iter()
        .map(|(s, t)| (s.as_str(), t.as_str()))
        .collect();
    for record in &records {
        let id = record["id"].as_str().unwrap_or_default();
        if !ids.iter().any(|wanted| wanted == id || wanted == "all") {
            continue;
        }
        let mut tool = ToolText::from_definition(&record["tool"]);
        if record["previous"].is_object() {
            tool.previous = Some(&record["previous"]);
        }
        let server = record["server"].as_str().unwrap_or_default();
        let found = assess(server, &tool, &catalogue);
        let own = own_tool_names(server, tool.name, &catalogue);
        println!(
            "== {id} ({}) score {:.2} threshold {:.2}",
            record["category"], found.score, found.threshold
        );
        for flag in &found.flags {
            println!("  FLAG {}: {}", flag.id, flag.reason);
        }
        let mut scored: Vec<_> = units_in(&tool, &own)
            .into_iter()
            .filter_map(|unit| {
                let tokens = unit_tokens(&unit);
                (!tokens.is_empty()).then(|| {
                    let s = model.score(unit.kind, &tokens, unit.added).score;
                    (s, unit, tokens)
                })
            })
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0));
        for (score, unit, tokens) in scored.iter().take(3) {
            println!("  {score:.2} {} {:?}", unit.path, unit.text);
            println!("       {:?}", model.explain(unit.kind, tokens, 8));
        }
    }
}
