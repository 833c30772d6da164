//! Time to scan one tool definition: every rule and the sentence model, as at connect.
//!
//! Run: `cargo bench -p warden-policy --bench scan`. `scan_catalogue` scans every
//! definition of the held-out set (`data/scanner/eval.jsonl`: 362 real definitions of
//! public servers, 24 hard-but-honest, 339 poisoned) against the whole catalogue's names,
//! so the throughput divan reports is tools per second; `scan_long` is one description of
//! 4,000 characters with a full schema. Issue 17's budget is 1 ms per tool.

// A bench is a measuring program: a broken setup should stop it with the reason.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;

use divan::Bencher;
use divan::counter::ItemsCount;
use serde_json::{Value, json};
use warden_policy::scan::{ToolText, assess};

fn main() {
    divan::main();
}

fn records() -> Vec<Value> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("data/scanner/eval.jsonl");
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[divan::bench(sample_count = 20)]
fn scan_catalogue(bencher: Bencher) {
    let records = records();
    let names: Vec<(String, String)> = records
        .iter()
        .map(|r| {
            (
                r["server"].as_str().unwrap().to_owned(),
                r["tool"]["name"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let others: Vec<(&str, &str)> = names
        .iter()
        .map(|(s, t)| (s.as_str(), t.as_str()))
        .collect();
    bencher.counter(ItemsCount::new(records.len())).bench(|| {
        for record in &records {
            let mut tool = ToolText::from_definition(&record["tool"]);
            tool.previous = record.get("previous");
            black_box(assess(record["server"].as_str().unwrap(), &tool, &others));
        }
    });
}

#[divan::bench(sample_count = 50)]
fn scan_long(bencher: Bencher) {
    let description = "Search the issues of a repository by label, author and state; results are \
        paginated and sorted by creation date. "
        .repeat(35);
    let schema = json!({
        "type": "object",
        "properties": (0..30).map(|i| (format!("p{i}"), json!({
            "type": "string",
            "description": "A filter on the results, such as a label name or an author's login.",
            "enum": ["open", "closed", "all"],
            "default": "open"
        }))).collect::<serde_json::Map<String, Value>>()
    });
    let tool = ToolText {
        name: "search_issues",
        description: Some(&description),
        input_schema: Some(&schema),
        ..ToolText::default()
    };
    bencher.bench(|| black_box(assess("github", &tool, &[])));
}
