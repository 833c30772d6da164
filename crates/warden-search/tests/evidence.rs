//! What the search's evidence beyond one tool's own words does (decision 0038): each step
//! of a multi-step request finds its tool, the tools of the server a request is about
//! rise together, and neither lets a padded server win other requests. These run by
//! words alone, so they hold in a build without the model too; each checks the ranking
//! of decision 0025 (`Tuning::BASELINE`) as a control, so a test passes only because of
//! the evidence it is about.

mod support;

use support::{catalogue, tool};
use warden_search::{Hit, Ranking, SearchIndex, ToolDoc, Tuning};

fn names(hits: &[Hit]) -> Vec<&str> {
    hits.iter().map(|h| h.qualified.as_str()).collect()
}

fn search(index: &SearchIndex, query: &str, limit: usize, tuning: Tuning) -> Vec<Hit> {
    index.search_tuned(query, limit, Ranking::Lexical, &tuning)
}

/// A market-data server whose tools share many words with one step of a request, tools
/// of other servers that share a word or two with that step, and a slides server whose
/// one tool shares a single word with the other step.
fn two_step_catalogue() -> Vec<ToolDoc> {
    let mut docs = catalogue();
    for (server, name, description) in [
        (
            "market",
            "get_price_history",
            "Daily share prices of a listed company over a past period, by year or month.",
        ),
        (
            "market",
            "get_price_chart",
            "Chart of the share prices of a listed company over a past year.",
        ),
        (
            "calendar",
            "list_events",
            "Events of the past year in a calendar.",
        ),
        ("crm", "get_company", "Profile of a listed company."),
        (
            "registry",
            "get_shareholders",
            "Shareholders of a company and their share.",
        ),
    ] {
        docs.push(tool(server, name, description, &[("id", "Identifier")]));
    }
    docs.push(tool(
        "slides",
        "create_presentation",
        "Create a new presentation file.",
        &[("title", "Title of the first slide")],
    ));
    docs
}

#[test]
fn a_two_step_request_finds_a_tool_for_each_step() {
    let index = SearchIndex::lexical(two_step_catalogue());
    let request = "Get the share prices of a listed company over the past year, \
                   then make a presentation";
    let wanted = "slides__create_presentation";
    // Control: ranked whole, the tools that share a word or two with the first step's
    // many words all come before the second step's tool.
    let whole = search(&index, request, 5, Tuning::BASELINE);
    assert!(!names(&whole).contains(&wanted), "{whole:?}");
    // Ranked by step too, each step brings its best tool to the top.
    let hits = search(&index, request, 3, Tuning::default());
    assert!(names(&hits).contains(&wanted), "{hits:?}");
    assert!(hits[0].qualified.starts_with("market__"), "{hits:?}");
    // The search the host uses is that one.
    assert_eq!(index.search(request, 3), hits);
}

#[test]
fn a_one_step_request_ranks_as_before_the_steps() {
    let index = SearchIndex::lexical(two_step_catalogue());
    let request = "share prices of a listed company over a past year";
    let shipped = names(&search(&index, request, 5, Tuning::default()))
        .into_iter()
        .map(str::to_owned)
        .collect::<Vec<_>>();
    let whole_only = Tuning {
        steps: warden_search::StepFusion::Off,
        ..Tuning::default()
    };
    let baseline = names(&search(&index, request, 5, whole_only))
        .into_iter()
        .map(str::to_owned)
        .collect::<Vec<_>>();
    assert_eq!(shipped, baseline);
}

/// A presentation server whose `add_slide` shares no word with a request for a
/// presentation; the request is about its server.
fn slides_catalogue() -> Vec<ToolDoc> {
    let mut docs = catalogue();
    docs.push(tool(
        "slides",
        "create_presentation",
        "Create a new presentation file.",
        &[("title", "Title")],
    ));
    docs.push(tool(
        "slides",
        "add_slide",
        "Append an empty page to the open deck.",
        &[("layout", "Page layout")],
    ));
    docs.push(tool(
        "slides",
        "save_presentation",
        "Write the presentation to disk.",
        &[("path", "Where to write it")],
    ));
    docs.push(tool(
        "docs",
        "create_document",
        "Create a new word processing document.",
        &[("title", "Title")],
    ));
    docs
}

#[test]
fn a_tool_of_the_server_the_request_is_about_rises_with_it() {
    let index = SearchIndex::lexical(slides_catalogue());
    let request = "make a presentation about cats";
    // Control: by its own words, add_slide is not found at all.
    let own = search(&index, request, 10, Tuning::BASELINE);
    assert!(!names(&own).contains(&"slides__add_slide"), "{own:?}");
    // With its server's score, it is found, after the tools that say "presentation".
    let hits = search(&index, request, 10, Tuning::default());
    let position = |name: &str| names(&hits).iter().position(|n| *n == name);
    let sibling = position("slides__add_slide").expect("add_slide is found");
    assert!(position("slides__create_presentation").is_some_and(|p| p < sibling));
    assert!(position("slides__save_presentation").is_some_and(|p| p < sibling));
    // A server that shares no word with the request lends nothing.
    assert!(position("docs__create_document").is_none(), "{hits:?}");
}

#[test]
fn a_request_of_unknown_words_still_finds_nothing() {
    let index = SearchIndex::lexical(slides_catalogue());
    for request in ["zebra quasar", "zebra. quasar, and xylophone then nebula"] {
        assert!(index.search(request, 10).is_empty(), "{request}");
    }
}

#[test]
fn a_server_padded_with_every_word_does_not_win_other_requests() {
    // Forty tools whose descriptions list the catalogue's words, so that the server's
    // document matches every request and lends its score to all forty.
    let words = "file directory git commit status time timezone fetch url issue message \
                 read write create list convert";
    let mut docs = catalogue();
    for i in 0..40 {
        docs.push(tool(
            "evil",
            &format!("anything_{i}"),
            &format!("{words} ").repeat(50),
            &[],
        ));
    }
    let index = SearchIndex::lexical(docs);
    for (query, want) in [
        ("read file", "filesystem__read_file"),
        ("git status", "git__git_status"),
        ("convert time", "time__convert_time"),
        ("fetch url", "fetch__fetch"),
        ("read the file, then show the git status", "git__git_status"),
    ] {
        let hits = index.search(query, 3);
        assert!(
            names(&hits).contains(&want),
            "{query}: {want} not in {hits:?}"
        );
        assert!(
            !hits[0].qualified.starts_with("evil__"),
            "{query}: {hits:?}"
        );
    }
}

#[test]
fn the_evidence_gives_the_same_ranking_every_time_in_any_input_order() {
    let forward = SearchIndex::lexical(slides_catalogue());
    let mut docs = slides_catalogue();
    docs.reverse();
    let backward = SearchIndex::lexical(docs);
    for query in [
        "make a presentation about cats",
        "read a file, then write it to the presentation",
    ] {
        let a = forward.search(query, 10);
        assert_eq!(a, forward.search(query, 10), "{query}");
        assert_eq!(a, backward.search(query, 10), "{query}");
    }
}

#[test]
fn a_huge_request_of_many_steps_is_cut_and_stays_fast() {
    let index = SearchIndex::lexical(slides_catalogue());
    let request = "read the file, then make a presentation. ".repeat(50_000);
    let start = std::time::Instant::now();
    let hits = index.search(&request, 10);
    assert!(start.elapsed() < std::time::Duration::from_secs(1));
    // Only the first QUERY_CHAR_CAP characters count, in at most STEP_CAP steps.
    let cut: String = request
        .chars()
        .take(warden_search::QUERY_CHAR_CAP)
        .collect();
    assert_eq!(hits, index.search(&cut, 10));
    assert_eq!(
        warden_search::steps::steps(&cut).len(),
        warden_search::steps::STEP_CAP
    );
    assert!(names(&hits).contains(&"filesystem__read_file"), "{hits:?}");
    assert!(
        names(&hits).contains(&"slides__create_presentation"),
        "{hits:?}"
    );
}
