//! Obvious queries over a small realistic catalogue find the right tool near the top.

mod support;

use warden_search::ToolIndex;

/// Each query and the qualified name it must find in the top 3.
const CASES: &[(&str, &str)] = &[
    ("read a file", "filesystem__read_file"),
    ("write text to a file", "filesystem__write_file"),
    (
        "list the files in a directory",
        "filesystem__list_directory",
    ),
    ("make a new folder", "filesystem__create_directory"),
    ("rename a file", "filesystem__move_file"),
    ("find files matching *.rs", "filesystem__search_files"),
    ("git status", "git__git_status"),
    ("commit my changes", "git__git_commit"),
    ("what changed compared to main branch", "git__git_diff"),
    ("show recent commit history", "git__git_log"),
    ("what time is it in Tokyo", "time__get_current_time"),
    ("get_current_time", "time__get_current_time"),
    (
        "convert 3pm London time to New York timezone",
        "time__convert_time",
    ),
    ("fetch url https://example.com", "fetch__fetch"),
    ("download a web page as markdown", "fetch__fetch"),
    (
        "remember a new entity in the knowledge graph",
        "memory__create_entities",
    ),
    (
        "open a GitHub issue about the crash",
        "github__create_issue",
    ),
    ("open a pull request", "github__create_pull_request"),
    (
        "send a message to the team slack channel",
        "slack__slack_post_message",
    ),
    ("weather forecast for tomorrow", "weather__get_forecast"),
    ("readFile", "filesystem__read_file"),
];

#[test]
fn obvious_queries_find_their_tool_in_the_top_3() {
    let index = ToolIndex::build(support::catalogue());
    assert_eq!(index.len(), 20);
    let mut misses = Vec::new();
    for (query, want) in CASES {
        let hits = index.search(query, 3);
        if !hits.iter().any(|h| h.qualified == *want) {
            misses.push(format!(
                "{query:?} -> {:?}",
                hits.iter().map(|h| &h.qualified).collect::<Vec<_>>()
            ));
        }
    }
    assert!(misses.is_empty(), "misses:\n{}", misses.join("\n"));
}

#[test]
fn exact_tool_names_rank_first() {
    let index = ToolIndex::build(support::catalogue());
    for name in [
        "read_file",
        "write_file",
        "git_status",
        "convert_time",
        "search_nodes",
    ] {
        let hits = index.search(name, 1);
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].tool, name, "query {name}");
    }
}

#[test]
fn hits_carry_server_and_tool_and_descending_scores() {
    let index = ToolIndex::build(support::catalogue());
    let hits = index.search("repository commit", 10);
    assert!(hits.len() >= 3, "{hits:?}");
    assert_eq!(hits[0].server, "git");
    assert_eq!(hits[0].tool, "git_commit");
    assert_eq!(hits[0].qualified, "git__git_commit");
    for pair in hits.windows(2) {
        assert!(pair[0].score >= pair[1].score, "{hits:?}");
    }
    assert!(hits.iter().all(|h| h.score > 0.0));
}
