//! Properties that must hold for any text, any catalogue and any query.

use proptest::prelude::*;
use serde_json::json;
use warden_search::{MAX_TERM_CHARS, ToolDoc, ToolIndex, is_stopword, tokenize};

/// Text mixing ASCII identifiers, punctuation and arbitrary Unicode.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z0-9_ .,-]{0,80}",
        any::<String>(),
        "(read|File|git_status|HTTPServer|größe|東京|x1|the| )*",
    ]
}

fn doc(i: usize, name: String, description: String, param: String) -> ToolDoc {
    ToolDoc {
        qualified: format!("s{}__{name}", i % 3),
        server: format!("s{}", i % 3),
        tool: name,
        title: None,
        description: Some(description),
        input_schema: json!({"type": "object", "properties": {param: {"type": "string"}}}),
        instructions: None,
    }
}

proptest! {
    #[test]
    fn terms_are_lowercase_bounded_and_never_stopwords(s in text()) {
        for term in tokenize(&s) {
            prop_assert!(!term.is_empty());
            prop_assert!(term.chars().count() <= MAX_TERM_CHARS);
            prop_assert!(!is_stopword(&term), "{term}");
            prop_assert!(term.chars().all(char::is_alphanumeric), "{term:?}");
            prop_assert_eq!(term.to_lowercase(), term.clone());
        }
    }

    #[test]
    fn hits_are_bounded_ordered_and_repeatable(
        tools in prop::collection::vec((text(), text(), text()), 0..12),
        query in text(),
        limit in 0usize..15,
    ) {
        let docs: Vec<ToolDoc> = tools
            .into_iter()
            .enumerate()
            .map(|(i, (name, description, param))| doc(i, name, description, param))
            .collect();
        let n = docs.len();
        let index = ToolIndex::build(docs.clone());
        let hits = index.search(&query, limit);
        prop_assert!(hits.len() <= limit.min(n));
        for pair in hits.windows(2) {
            let ordered = pair[0].score > pair[1].score
                || (pair[0].score == pair[1].score && pair[0].qualified <= pair[1].qualified);
            prop_assert!(ordered, "{:?}", hits);
        }
        prop_assert_eq!(&hits, &index.search(&query, limit));
        prop_assert_eq!(&hits, &ToolIndex::build(docs).search(&query, limit));
        // Every hit shares a term with the query.
        if tokenize(&query).is_empty() {
            prop_assert!(hits.is_empty());
        }
    }
}
