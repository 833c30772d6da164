//! `warden tools --search`: the ranking of the host's tool search, printed for a person or
//! as JSON, against real peers (npm and PyPI servers) and the Rust test server; and the
//! usage errors of `--limit`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use serde_json::Value;
use support::{Scratch, assert_exit, copied_server, describe, json, server_toml, stderr, stdout};

const LIMIT: Duration = Duration::from_secs(60);

/// Five real peers with overlapping vocabularies (files, time, git, memory, everything),
/// configured for a scratch folder as in `peers.rs`.
fn peers(scratch: &Scratch) -> String {
    support::peer_entries(scratch)
        .into_iter()
        .filter(|(name, _)| *name != "pysdk")
        .map(|(_, toml)| toml)
        .collect()
}

/// Runs `warden --config CONFIG ARGS...`.
fn run(scratch: &Scratch, config: &Path, args: &[&str]) -> Output {
    let mut full = vec!["--config", config.to_str().unwrap()];
    full.extend_from_slice(args);
    scratch.run(&full, LIMIT)
}

/// The qualified names of a `--json` ranking, in rank order.
fn ranked(output: &Output) -> Vec<String> {
    json(output)
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {}", describe(output)))
        .iter()
        .map(|hit| hit["qualified"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn real_peers_rank_the_expected_tools_first_the_same_way_every_time() {
    let scratch = Scratch::new();
    let config = scratch.config(&peers(&scratch));

    let query = ["tools", "--search", "current time in a timezone", "--json"];
    let first = run(&scratch, &config, &query);
    assert_exit(&first, 0);
    let hits = json(&first);
    let top = &hits[0];
    assert_eq!(top["qualified"], "time__get_current_time", "{hits:#}");
    assert_eq!(top["server"], "time");
    assert_eq!(top["tool"], "get_current_time");
    assert!(top["score"].as_f64().unwrap() > 0.0, "{hits:#}");
    // Exactly the four fields, in that order, best first.
    let keys: Vec<&str> = top
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let mut sorted = keys.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, ["qualified", "score", "server", "tool"]);
    assert!(hits.as_array().unwrap().len() <= 8, "default limit is 8");
    let scores: Vec<f64> = hits
        .as_array()
        .unwrap()
        .iter()
        .map(|hit| hit["score"].as_f64().unwrap())
        .collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");

    // Deterministic: a second run (new processes, new connections) prints the same bytes,
    // once the catalogue's encoder vectors are stored. A first search of definitions the
    // model directory has no vectors for ranks with the static table's and then stores
    // them (decision 0047), so the ranking changes once: then compare the two after it.
    let mut earlier = first;
    if stderr(&earlier).contains("computing the search model's vectors") {
        earlier = run(&scratch, &config, &query);
        assert_exit(&earlier, 0);
        assert!(
            !stderr(&earlier).contains("computing"),
            "{}",
            describe(&earlier)
        );
    }
    let second = run(&scratch, &config, &query);
    assert_exit(&second, 0);
    assert_eq!(
        stdout(&earlier),
        stdout(&second),
        "{}\n{}",
        describe(&earlier),
        describe(&second)
    );

    let output = run(
        &scratch,
        &config,
        &["tools", "--search", "read a file", "--json", "--limit", "3"],
    );
    assert_exit(&output, 0);
    let top3 = ranked(&output);
    assert!(top3.len() <= 3, "{top3:?}");
    assert!(
        top3.iter()
            .any(|q| q == "filesystem__read_text_file" || q == "filesystem__read_file"),
        "{top3:?}"
    );

    // The text view: a header, then rank, qualified name, server, raw name, 4-decimal score.
    let output = run(
        &scratch,
        &config,
        &[
            "tools",
            "--search",
            "current time in a timezone",
            "--limit",
            "2",
        ],
    );
    assert_exit(&output, 0);
    let text = stdout(&output);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    let header: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(header, ["#", "TOOL", "SERVER", "NAME", "SCORE"]);
    let row: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(
        row[..4],
        ["1", "time__get_current_time", "time", "get_current_time"]
    );
    let score = row[4];
    assert_eq!(score.split('.').nth(1).map(str::len), Some(4), "{text}");
    assert_eq!(score.parse::<f64>().unwrap(), scores[0]);
    assert!(lines[2].trim_start().starts_with("2 "), "{text}");
    scratch.assert_no_leftovers();
}

/// Server `s` running a copy of the test server (modern era), with extra `env` entries and
/// extra top-level TOML (policy rules).
fn testserver_config(program: &Path, env: &str, extra: &str) -> String {
    let env = if env.is_empty() {
        String::new()
    } else {
        format!("env = {{ {env} }}")
    };
    format!("{}{extra}", server_toml("s", program, &["good"], &env))
}

#[test]
fn hidden_and_held_back_tools_are_never_found() {
    let scratch = Scratch::new();
    let program = copied_server(&scratch);
    // Pin the three tools first.
    let config = scratch.config(&testserver_config(&program, "", ""));
    let output = run(
        &scratch,
        &config,
        &["tools", "--search", "adds integers", "--json"],
    );
    assert_exit(&output, 0);
    assert_eq!(ranked(&output)[0], "s__add");
    let output = run(
        &scratch,
        &config,
        &[
            "tools",
            "--search",
            "always fails with a tool error",
            "--json",
        ],
    );
    assert_eq!(ranked(&output)[0], "s__fail", "{}", describe(&output));

    // `fail` hidden by policy; `extra` new and so held back until approved.
    scratch.config(&testserver_config(
        &program,
        r#"WARDEN_TEST_EXTRA_TOOL = "1""#,
        "[[policy.rules]]\ntools = \"s__f*\"\neffect = \"hide\"\n",
    ));
    for query in [
        "always fails with a tool error",
        "fail",
        "answers extra",
        "extra",
    ] {
        let output = run(&scratch, &config, &["tools", "--search", query, "--json"]);
        assert_exit(&output, 0);
        let found = ranked(&output);
        assert!(
            !found.iter().any(|q| q == "s__fail" || q == "s__extra"),
            "{query}: {found:?}"
        );
    }
    scratch.assert_no_leftovers();
}

#[test]
fn no_hit_is_a_note_not_an_error() {
    let scratch = Scratch::new();
    let program = copied_server(&scratch);
    let config = scratch.config(&testserver_config(&program, "", ""));
    let output = run(
        &scratch,
        &config,
        &["tools", "--search", "zebra quasar", "--json"],
    );
    assert_exit(&output, 0);
    assert_eq!(json(&output), Value::Array(Vec::new()));
    assert!(
        stderr(&output).contains("no tool matches \"zebra quasar\""),
        "{}",
        describe(&output)
    );
    let output = run(&scratch, &config, &["tools", "--search", "zebra quasar"]);
    assert_exit(&output, 0);
    assert_eq!(stdout(&output), "");
    assert!(
        stderr(&output).contains("no tool matches \"zebra quasar\""),
        "{}",
        describe(&output)
    );
    scratch.assert_no_leftovers();
}

#[test]
fn limit_needs_search_and_a_value_from_1_to_50() {
    let scratch = Scratch::new();
    // No server is needed: these are refused before anything is read or started.
    let config = scratch.config("");
    for args in [
        &["tools", "--limit", "3"][..],
        &["tools", "--limit", "3", "--json"],
        &["tools", "--search", "time", "--limit", "0"],
        &["tools", "--search", "time", "--limit", "51"],
        &["tools", "--search", "time", "--limit", "-1"],
        &["tools", "--search", "time", "--limit", "many"],
        &["tools", "--search"],
    ] {
        let output = run(&scratch, &config, args);
        assert_exit(&output, 2);
        assert_eq!(stdout(&output), "", "{args:?}");
        assert!(!stderr(&output).is_empty(), "{args:?}");
    }
    let output = run(&scratch, &config, &["tools", "--limit", "3"]);
    assert!(
        stderr(&output).contains("--search"),
        "{}",
        describe(&output)
    );
    let output = run(
        &scratch,
        &config,
        &["tools", "--search", "x", "--limit", "51"],
    );
    assert!(stderr(&output).contains("1..=50"), "{}", describe(&output));
    scratch.assert_no_leftovers();
}

#[test]
fn a_failed_server_is_named_and_the_others_are_still_searched() {
    let scratch = Scratch::new();
    let program = copied_server(&scratch);
    let mut toml = testserver_config(&program, "", "");
    toml.push_str(&server_toml(
        "broken",
        "/nonexistent/mcp-server".as_ref(),
        &[],
        "",
    ));
    let config = scratch.config(&toml);
    let output = run(
        &scratch,
        &config,
        &["tools", "--search", "echo a message", "--json"],
    );
    assert_exit(&output, 0);
    assert_eq!(ranked(&output)[0], "s__echo");
    let err = stderr(&output);
    assert!(
        err.contains("warden: broken failed, its tools are not searched: "),
        "{}",
        describe(&output)
    );
    scratch.assert_no_leftovers();
}

/// A private search-model folder: links to the installed model's files (weights,
/// vocabulary, distilled table and its record), so the encoder's stored vectors of this
/// test start empty without distilling again.
fn private_model(scratch: &Scratch) -> std::path::PathBuf {
    let shared = std::path::PathBuf::from(
        std::env::var_os("WARDEN_SEARCH_MODEL")
            .expect("these tests need the search model: WARDEN_SEARCH_MODEL=DIR"),
    );
    let dir = scratch.path().join("search-model");
    std::fs::create_dir_all(&dir).unwrap();
    for entry in std::fs::read_dir(&shared).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::os::unix::fs::symlink(entry.path(), dir.join(entry.file_name())).unwrap();
        }
    }
    dir
}

/// The encoder's stored tool vectors in a model folder.
fn stored_vectors(model: &Path) -> usize {
    std::fs::read_dir(model)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("tool-vectors-"))
        .flat_map(|e| std::fs::read_dir(e.path()).unwrap().flatten())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".f32"))
        .count()
}

#[test]
fn a_one_shot_search_stores_the_encoder_vectors_the_next_one_uses() {
    let scratch = Scratch::new();
    let program = copied_server(&scratch);
    let config = scratch.config(&testserver_config(&program, "", ""));
    let model = private_model(&scratch);
    let search = |query: &str| {
        let mut command = scratch.warden(&[
            "--config",
            config.to_str().unwrap(),
            "tools",
            "--search",
            query,
            "--json",
        ]);
        command.env("WARDEN_SEARCH_MODEL", &model);
        support::run_with_limit(command, Duration::from_secs(120))
    };
    assert_eq!(stored_vectors(&model), 0);
    // The first search answers at once, then computes the vectors of the definitions it
    // has not seen and stores them before it exits.
    let first = search("adds integers");
    assert_exit(&first, 0);
    assert_eq!(ranked(&first)[0], "s__add");
    assert!(
        stderr(&first).contains("computing the search model's vectors of"),
        "{}",
        describe(&first)
    );
    let stored = stored_vectors(&model);
    assert!(stored >= 3, "{stored} vectors stored: {}", describe(&first));
    // The next one has nothing left to compute, and finds the same tool first.
    let second = search("adds integers");
    assert_exit(&second, 0);
    assert_eq!(ranked(&second)[0], "s__add");
    assert!(
        !stderr(&second).contains("computing"),
        "{}",
        describe(&second)
    );
    assert_eq!(stored_vectors(&model), stored);
    scratch.assert_no_leftovers();
}
