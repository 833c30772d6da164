//! The ranking's contract: determinism, tie order, limits, and resistance to padding.

mod support;

use std::time::{Duration, Instant};

use serde_json::json;
use support::{catalogue, tool};
use warden_search::{DEFINITION_CHAR_CAP, Hit, ToolDoc, ToolIndex};

fn names(hits: &[Hit]) -> Vec<&str> {
    hits.iter().map(|h| h.qualified.as_str()).collect()
}

#[test]
fn same_input_gives_the_same_ranking() {
    let first = ToolIndex::build(catalogue());
    let second = ToolIndex::build(catalogue());
    for query in [
        "file",
        "git repository changes",
        "time zone",
        "create a new thing",
    ] {
        let a = first.search(query, 20);
        assert!(!a.is_empty(), "{query}");
        assert_eq!(a, first.search(query, 20), "{query}: repeat on one index");
        assert_eq!(a, second.search(query, 20), "{query}: rebuilt index");
    }
}

#[test]
fn input_order_does_not_change_the_ranking() {
    let forward = ToolIndex::build(catalogue());
    let mut docs = catalogue();
    docs.reverse();
    let backward = ToolIndex::build(docs);
    for query in ["file", "repository", "create new", "path"] {
        assert_eq!(
            forward.search(query, 20),
            backward.search(query, 20),
            "{query}"
        );
    }
}

#[test]
fn equal_scores_are_ordered_by_qualified_name() {
    // Identical definitions except for the names, which share no word with the query.
    let docs: Vec<ToolDoc> = ["zeta", "alpha", "mu", "beta"]
        .iter()
        .map(|server| tool(server, "tool", "Summarise the document.", &[]))
        .collect();
    let index = ToolIndex::build(docs);
    let hits = index.search("summarise", 10);
    assert_eq!(
        names(&hits),
        ["alpha__tool", "beta__tool", "mu__tool", "zeta__tool"]
    );
    assert!(hits.windows(2).all(|p| p[0].score == p[1].score));
    // The limit cuts the same order.
    assert_eq!(
        names(&index.search("summarise", 2)),
        ["alpha__tool", "beta__tool"]
    );
}

#[test]
fn scores_are_rounded_to_four_decimals() {
    let index = ToolIndex::build(catalogue());
    let hits = index.search("read file path", 20);
    assert!(!hits.is_empty());
    for hit in hits {
        let scaled = hit.score * 10_000.0;
        assert!((scaled - scaled.round()).abs() < 1e-6, "{}", hit.score);
    }
}

#[test]
fn empty_stopword_and_unknown_queries_return_nothing() {
    let index = ToolIndex::build(catalogue());
    assert!(index.search("", 10).is_empty());
    assert!(index.search("   ", 10).is_empty());
    assert!(index.search("?!., ---", 10).is_empty());
    assert!(index.search("the of and to is", 10).is_empty());
    assert!(index.search("xylophone quokka", 10).is_empty());
}

#[test]
fn limit_bounds_the_hits() {
    let index = ToolIndex::build(catalogue());
    assert!(index.search("file", 0).is_empty());
    assert_eq!(index.search("path", 1).len(), 1);
    assert_eq!(index.search("path", 3).len(), 3);
    let all = index.search("path", 1000);
    assert!(all.len() > 3 && all.len() <= 20, "{}", all.len());
    assert_eq!(index.search("path", 3), all[..3]);
}

#[test]
fn an_empty_index_finds_nothing() {
    let index = ToolIndex::build(Vec::new());
    assert!(index.is_empty());
    assert_eq!(index.len(), 0);
    assert!(index.search("file", 10).is_empty());
}

#[test]
fn a_giant_repeated_description_does_not_beat_a_name_match() {
    let mut docs = catalogue();
    docs.push(tool(
        "weather",
        "get_weather",
        "Current conditions for a city.",
        &[("city", "City name")],
    ));
    docs.push(tool("evil", "helper", &"weather ".repeat(100_000), &[]));
    let index = ToolIndex::build(docs);
    let hits = index.search("weather", 10);
    let position = |name: &str| hits.iter().position(|h| h.qualified == name);
    let honest = position("weather__get_weather").expect("the honest tool is found");
    if let Some(evil) = position("evil__helper") {
        assert!(honest < evil, "{hits:?}");
    }
    assert_eq!(honest, 0, "{hits:?}");
}

#[test]
fn padding_with_every_query_word_does_not_win_other_queries() {
    // A description listing the catalogue's words many times, to be picked for anything.
    let words = "file directory git commit status time timezone fetch url issue message";
    let mut docs = catalogue();
    docs.push(tool(
        "evil",
        "anything",
        &format!("{words} ").repeat(2_000),
        &[],
    ));
    let index = ToolIndex::build(docs);
    for (query, want) in [
        ("read file", "filesystem__read_file"),
        ("git status", "git__git_status"),
        ("convert time", "time__convert_time"),
        ("fetch url", "fetch__fetch"),
    ] {
        let hits = index.search(query, 3);
        assert_eq!(hits[0].qualified, want, "{query}: {hits:?}");
    }
}

#[test]
fn text_past_the_cap_is_not_indexed() {
    let padding = "x".repeat(DEFINITION_CHAR_CAP);
    let docs = vec![
        tool("s", "late", &format!("{padding} needle"), &[]),
        tool("s", "early", "needle", &[]),
    ];
    let index = ToolIndex::build(docs);
    assert_eq!(names(&index.search("needle", 10)), ["s__early"]);
}

#[test]
fn unicode_text_and_queries_work() {
    let docs = vec![
        tool(
            "wetter",
            "vorhersage",
            "Wettervorhersage für eine Stadt: Größe egal.",
            &[],
        ),
        tool("jp", "tenki", "東京 の 天気 を 取得", &[]),
        tool("s", "other", "Something else entirely.", &[]),
    ];
    let index = ToolIndex::build(docs);
    assert_eq!(
        names(&index.search("GRÖSSE größe", 5)),
        ["wetter__vorhersage"]
    );
    assert_eq!(names(&index.search("東京", 5)), ["jp__tenki"]);
    // A cut in the middle of multi-byte text must not panic.
    let long = "é".repeat(5_000);
    let _ = index.search(&long, 5);
}

#[test]
fn nested_parameters_are_searchable() {
    let mut docs = catalogue();
    docs.push(ToolDoc {
        qualified: "mail__send".into(),
        server: "mail".into(),
        tool: "send".into(),
        title: Some("Send mail".into()),
        description: Some("Sends a message.".into()),
        input_schema: json!({
            "type": "object",
            "properties": {
                "attachments": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {"mime_type": {"type": "string", "description": "Attachment MIME type"}}
                    }
                }
            }
        }),
        instructions: None,
    });
    let index = ToolIndex::build(docs);
    assert_eq!(
        index.search("mime type of attachments", 1)[0].qualified,
        "mail__send"
    );
}

#[test]
fn a_huge_query_is_cut_and_stays_fast() {
    let index = ToolIndex::build(catalogue());
    // Words of letters only, none of them in the catalogue.
    let word = |i: u32| {
        let letter = |n: u32| char::from_u32(u32::from('a') + n % 26).unwrap_or('a');
        format!("q{}{}{} ", letter(i / 676), letter(i / 26), letter(i))
    };
    let query: String = (0..200_000).map(word).collect();
    let start = Instant::now();
    let hits = index.search(&query, 10);
    assert!(start.elapsed() < Duration::from_secs(1));
    assert!(hits.is_empty());
    // Terms past the cap are not used: the only matching word comes after 64 others.
    let late: String = (0..100).map(word).collect::<String>() + "git";
    assert!(index.search(&late, 10).is_empty());
    assert!(!index.search("git", 10).is_empty());
}

#[test]
fn index_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<ToolIndex>();
    let index = std::sync::Arc::new(ToolIndex::build(catalogue()));
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let index = index.clone();
            std::thread::spawn(move || index.search("git commit", 5))
        })
        .collect();
    let results: Vec<Vec<Hit>> = threads
        .into_iter()
        .map(|t| t.join().unwrap_or_default())
        .collect();
    assert_eq!(results[0], results[1]);
    assert_eq!(results[0][0].qualified, "git__git_commit");
}
