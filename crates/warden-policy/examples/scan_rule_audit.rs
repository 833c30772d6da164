//! Counts where chosen rules of the description scanner fire in data files: per file and
//! category, how many records each rule flags, and every honest record it flags with its
//! reason. A development aid for a rule's precision on the honest data (decision 0027,
//! revision 7); it prints no misses, so it can be run on a held-out file without reading it.
//!
//! Run: `cargo run --release -p warden-policy --example scan_rule_audit -- RULE[,RULE...]
//! FILE.jsonl [FILE.jsonl ...]` (`FILE` relative to `data/scanner/` unless it is a path).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use serde_json::Value;
use warden_policy::scan::{ToolText, assess};

fn honest(record: &Value) -> bool {
    record["label"].as_i64() != Some(1)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (rules, files) = args.split_first().expect("RULE[,RULE...] FILE...");
    let rules: Vec<&str> = rules.split(',').collect();
    for file in files {
        let path = if file.contains('/') {
            std::path::PathBuf::from(file)
        } else {
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("data/scanner")
                .join(file)
        };
        let records: Vec<Value> = std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .filter(|line| !line.trim().is_empty())
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
        // (category, honest) -> (records, flagged by any chosen rule, flagged by anything)
        let mut counts: BTreeMap<(String, bool), (usize, usize, usize)> = BTreeMap::new();
        let mut honest_hits = Vec::new();
        for record in &records {
            let mut tool = ToolText::from_definition(&record["tool"]);
            if record["previous"].is_object() {
                tool.previous = Some(&record["previous"]);
            }
            let server = record["server"].as_str().unwrap_or_default();
            let found = assess(server, &tool, &catalogue);
            let chosen: Vec<_> = found
                .flags
                .iter()
                .filter(|f| rules.contains(&f.id))
                .collect();
            let category = record["category"].as_str().unwrap_or_default().to_owned();
            let entry = counts.entry((category, honest(record))).or_default();
            entry.0 += 1;
            entry.1 += usize::from(!chosen.is_empty());
            entry.2 += usize::from(!found.flags.is_empty());
            if honest(record) {
                for flag in chosen {
                    honest_hits.push(format!(
                        "  {} {}: {}",
                        record["id"].as_str().unwrap_or_default(),
                        flag.id,
                        flag.reason
                    ));
                }
            }
        }
        println!("== {file}");
        for ((category, is_honest), (n, by_rules, by_any)) in &counts {
            let side = if *is_honest { "honest" } else { "poisoned" };
            println!("{category:<18} {side:<8} {by_rules:>5} by rules, {by_any:>5} by any / {n}");
        }
        for line in &honest_hits {
            println!("{line}");
        }
    }
}
