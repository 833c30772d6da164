//! The semantic ranking's contract: with the real model, a request whose words differ from
//! a tool's description finds it; without a model the search is by words, as before; a
//! model whose files do not have the pinned digests is refused with an error that names
//! the file; a tiny encoder is distilled once and its table reused.
#![cfg(feature = "semantic")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use sha2::{Digest, Sha256};
use warden_search::semantic::{
    ATTENTION_HEADS, DISTILLED_PREFIX, EmbeddingCache, MODEL_DIR_ENV, Model, ModelError, ModelPin,
    TOOL_VECTORS_PREFIX, UNUSED_FOR, VOCAB_FILE, WEIGHTS_FILE, prune_store, write_tensors,
};
use warden_search::{QUERY_MAP_RIDGE, Ranking, SearchIndex, ToolDoc, ToolIndex, Tuning};

fn tool(server: &str, name: &str, description: &str, params: &[&str]) -> ToolDoc {
    let properties: serde_json::Map<String, serde_json::Value> = params
        .iter()
        .map(|p| ((*p).to_owned(), json!({"type": "string"})))
        .collect();
    ToolDoc {
        qualified: format!("{server}__{name}"),
        server: server.into(),
        tool: name.into(),
        title: None,
        description: Some(description.into()),
        input_schema: json!({"type": "object", "properties": properties}),
        instructions: None,
    }
}

fn catalogue() -> Vec<ToolDoc> {
    vec![
        tool(
            "fs",
            "read_file",
            "Read the complete contents of a file from disk.",
            &["path"],
        ),
        tool(
            "fs",
            "list_directory",
            "List the entries of a directory.",
            &["path"],
        ),
        tool(
            "git",
            "git_commit",
            "Record changes to the repository.",
            &["message"],
        ),
        tool(
            "mail",
            "send_email",
            "Send an email to one or more recipients.",
            &["to", "subject", "body"],
        ),
        tool(
            "meteo",
            "get_forecast",
            "Meteorological conditions predicted for a city: temperature, rain, wind.",
            &["city"],
        ),
        tool(
            "travel",
            "search_flights",
            "Find airline connections between two airports on a date.",
            &["origin", "destination", "date"],
        ),
        tool(
            "market",
            "get_quote",
            "Latest share price of a listed company.",
            &["ticker"],
        ),
        tool(
            "kitchen",
            "find_recipe",
            "Dishes and cooking instructions for given ingredients.",
            &["ingredients"],
        ),
    ]
}

/// The installed model's directory: `WARDEN_SEARCH_MODEL` (scripts/test sets it and
/// installs the model there with scripts/install-search-model).
fn installed_dir() -> PathBuf {
    std::env::var_os(MODEL_DIR_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(warden_search::semantic::model_dir)
}

/// A private directory that links to the installed model's files (not to any stored
/// encoder tool vectors), so what a test finds there is what it put there.
fn private_model_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let installed = installed_dir();
    for entry in std::fs::read_dir(&installed).unwrap_or_else(|e| {
        panic!(
            "the search model is needed for this test ({}: {e}); \
             run scripts/install-search-model DIR and set {MODEL_DIR_ENV}=DIR",
            installed.display()
        )
    }) {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::os::unix::fs::symlink(entry.path(), dir.path().join(entry.file_name())).unwrap();
        }
    }
    dir
}

/// The installed model, loaded from a private directory that no test encodes tool vectors
/// into: indexes built with it use the static table's vectors. Its absence fails the
/// test, with the fix.
fn real_model() -> Arc<Model> {
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    let dir = DIR.get_or_init(private_model_dir);
    match Model::load(dir.path()) {
        Ok(model) => Arc::new(model),
        Err(e) => panic!(
            "the search model is needed for this test: {e}\n\
             run scripts/install-search-model DIR and set {MODEL_DIR_ENV}=DIR"
        ),
    }
}

/// The installed model in a fresh private directory of its own (for tests that store
/// encoder tool vectors), with the directory.
fn fresh_model() -> (tempfile::TempDir, Arc<Model>) {
    let dir = private_model_dir();
    let model = Model::load(dir.path()).unwrap();
    (dir, Arc::new(model))
}

/// `catalogue()`'s texts as the index embeds them.
fn texts(docs: &[ToolDoc]) -> Vec<String> {
    SearchIndex::encoder_texts(docs)
}

fn encode_all(cache: &EmbeddingCache, model: &Model, docs: &[ToolDoc]) -> usize {
    let texts = texts(docs);
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    cache.encode(model, &texts).unwrap()
}

fn first(hits: &[warden_search::Hit]) -> &str {
    hits.first().map_or("", |h| h.qualified.as_str())
}

#[test]
fn with_the_model_a_request_in_other_words_finds_the_tool() {
    other_words_find_the_tool(real_model(), false);
}

#[test]
fn with_encoder_tool_vectors_a_request_in_other_words_finds_the_tool() {
    let (_dir, model) = fresh_model();
    other_words_find_the_tool(model, true);
}

fn other_words_find_the_tool(model: Arc<Model>, encoder: bool) {
    let cache = EmbeddingCache::default();
    if encoder {
        assert_eq!(encode_all(&cache, &model, &catalogue()), catalogue().len());
    }
    let cases = [
        (
            "will it be stormy in Lisbon this weekend",
            "meteo__get_forecast",
        ),
        (
            "what is Apple trading at on the stock exchange",
            "market__get_quote",
        ),
        ("book a plane ticket to Tokyo", "travel__search_flights"),
        (
            "what could I make for dinner with eggs and spinach",
            "kitchen__find_recipe",
        ),
    ];
    let lexical = ToolIndex::build(catalogue());
    let hybrid = SearchIndex::with_model(catalogue(), model, &cache);
    assert_eq!(hybrid.ranking(), Ranking::Hybrid);
    assert_eq!(hybrid.encoder_vectors(), encoder);
    for (request, wanted) in cases {
        // The words alone do not find it (the request shares no term with the tool)...
        let by_words = lexical.search(request, 3);
        assert!(
            by_words.iter().all(|h| h.qualified != wanted),
            "{request}: the lexical search already finds {wanted}, so this case proves nothing: {by_words:?}"
        );
        // ...the meaning does, first.
        let hits = hybrid.search(request, 3);
        assert_eq!(first(&hits), wanted, "{request}: {hits:?}");
        assert_eq!(
            first(&hybrid.search_by(request, 3, Ranking::Semantic)),
            wanted,
            "{request}"
        );
    }
    // A request that does share words still ranks by them too.
    assert_eq!(first(&hybrid.search("read a file", 3)), "fs__read_file");
    // Noise finds nothing: no shared word and no tool near enough.
    assert!(
        hybrid.search("zebra quasar", 5).is_empty(),
        "{:?}",
        hybrid.search("zebra quasar", 5)
    );
}

#[test]
fn with_the_model_each_step_of_a_request_in_other_words_finds_its_tool() {
    let hybrid = SearchIndex::with_model(catalogue(), real_model(), &EmbeddingCache::default());
    let request = "Will it be stormy in Lisbon this weekend? If so, book me a plane ticket \
                   to Tokyo, and then suggest what I could make for dinner with eggs";
    let hits = hybrid.search(request, 5);
    for wanted in [
        "meteo__get_forecast",
        "travel__search_flights",
        "kitchen__find_recipe",
    ] {
        assert!(
            hits.iter().any(|h| h.qualified == wanted),
            "{wanted} not in {hits:?}"
        );
    }
    // Noise in several steps still finds nothing.
    assert!(
        hybrid
            .search("zebra quasar. nebula, and then xylophone", 5)
            .is_empty()
    );
}

#[test]
fn words_every_tool_uses_do_not_drown_the_word_that_tells_tools_apart() {
    // Every tool's description ends with the same boilerplate; a request written in it
    // asks, in one word, for the weather.
    let boilerplate = " Returns the result as formatted text for the assistant to read.";
    let docs: Vec<ToolDoc> = catalogue()
        .into_iter()
        .map(|mut doc| {
            doc.description = doc.description.map(|d| d + boilerplate);
            doc
        })
        .collect();
    let index = SearchIndex::with_model(docs, real_model(), &EmbeddingCache::default());
    let request = "return the result as formatted text for the assistant to read: \
                   is it going to be stormy";
    let semantic = |query_idf: bool| {
        let tuning = Tuning {
            query_idf,
            ..Tuning::default()
        };
        first(&index.search_tuned(request, 3, Ranking::Semantic, &tuning)).to_owned()
    };
    // Control: each token counted alike, the boilerplate's many tokens pull the request's
    // vector to wherever the boilerplate happens to sit.
    assert_ne!(semantic(false), "meteo__get_forecast");
    // Weighted by rarity among the tools' texts, the one word that tells them apart wins.
    assert_eq!(semantic(true), "meteo__get_forecast");
    assert!(Tuning::default().query_idf);
}

#[test]
fn encoder_tool_vectors_are_used_once_every_tool_has_one_and_are_kept_on_disk() {
    let (dir, model) = fresh_model();
    let cache = EmbeddingCache::default();
    // None stored yet: the static table's vectors, and nothing is computed meanwhile.
    let index = SearchIndex::with_model(catalogue(), Arc::clone(&model), &cache);
    assert!(!index.encoder_vectors());
    let store = dir.path().join(format!(
        "{TOOL_VECTORS_PREFIX}{}",
        &model.weights_sha256()[..16]
    ));
    assert!(!store.exists());
    // Computed once, kept on disk, one file per definition.
    assert_eq!(encode_all(&cache, &model, &catalogue()), catalogue().len());
    assert_eq!(encode_all(&cache, &model, &catalogue()), 0);
    assert_eq!(
        std::fs::read_dir(&store).unwrap().count(),
        catalogue().len()
    );
    // Another process (a new cache) finds them on disk.
    let fresh = EmbeddingCache::default();
    let index = SearchIndex::with_model(catalogue(), Arc::clone(&model), &fresh);
    assert!(index.encoder_vectors());
    assert_eq!(
        first(&index.search("will it be stormy in Lisbon this weekend", 3)),
        "meteo__get_forecast"
    );
    // A new definition has none yet: the whole index keeps the static table's vectors
    // until it has one, so one ranking never mixes the two.
    let mut more = catalogue();
    more.push(tool(
        "fs",
        "write_file",
        "Create or overwrite a file.",
        &["path", "content"],
    ));
    assert!(!SearchIndex::with_model(more.clone(), Arc::clone(&model), &fresh).encoder_vectors());
    assert_eq!(encode_all(&fresh, &model, &more), 1);
    assert!(SearchIndex::with_model(more, Arc::clone(&model), &fresh).encoder_vectors());
    // Server instructions are embedded too: a new instructions text needs its vector.
    let mut instructed = catalogue();
    instructed[4].instructions = Some("A weather service for travellers.".into());
    assert!(
        !SearchIndex::with_model(instructed.clone(), Arc::clone(&model), &fresh).encoder_vectors()
    );
    assert_eq!(encode_all(&fresh, &model, &instructed), 1);
    assert!(SearchIndex::with_model(instructed, Arc::clone(&model), &fresh).encoder_vectors());
    // The static table's ranking can still be asked for.
    assert!(!SearchIndex::with_table_vectors(catalogue(), model, &fresh).encoder_vectors());
}

#[test]
fn a_damaged_stored_tool_vector_is_ignored_and_computed_again() {
    let (dir, model) = fresh_model();
    let cache = EmbeddingCache::default();
    encode_all(&cache, &model, &catalogue());
    let store = dir.path().join(format!(
        "{TOOL_VECTORS_PREFIX}{}",
        &model.weights_sha256()[..16]
    ));
    let files: Vec<PathBuf> = std::fs::read_dir(&store)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    // One cut short, one not a unit vector.
    let bytes = std::fs::read(&files[0]).unwrap();
    std::fs::write(&files[0], &bytes[..bytes.len() - 4]).unwrap();
    std::fs::write(&files[1], vec![0u8; bytes.len()]).unwrap();
    let fresh = EmbeddingCache::default();
    assert!(!SearchIndex::with_model(catalogue(), Arc::clone(&model), &fresh).encoder_vectors());
    assert_eq!(encode_all(&fresh, &model, &catalogue()), 2);
    assert_eq!(std::fs::read(&files[0]).unwrap().len(), bytes.len());
    let again = EmbeddingCache::default();
    assert!(SearchIndex::with_model(catalogue(), model, &again).encoder_vectors());
}

#[test]
fn a_background_cache_computes_missing_tool_vectors_for_a_later_index() {
    let (_dir, model) = fresh_model();
    let cache = EmbeddingCache::background();
    let start = std::time::Instant::now();
    let index = SearchIndex::with_model(catalogue(), Arc::clone(&model), &cache);
    // The index is built at once, with the static table's vectors...
    assert!(!index.encoder_vectors());
    assert!(
        start.elapsed() < std::time::Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    // ...and a later one, once the thread is done, has the encoder's.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    loop {
        if SearchIndex::with_model(catalogue(), Arc::clone(&model), &cache).encoder_vectors() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the background encoder did not finish in 300 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

#[test]
fn settle_waits_for_the_stored_vectors_and_the_encoder_stays_loaded_between_runs() {
    let (dir, model) = fresh_model();
    let cache = EmbeddingCache::background();
    assert_eq!(cache.pending(), 0);
    assert_eq!(cache.settle(Duration::from_secs(1)), 0, "nothing queued");
    let index = SearchIndex::with_model(catalogue(), Arc::clone(&model), &cache);
    assert!(!index.encoder_vectors());
    assert!(cache.pending() > 0);
    assert_eq!(cache.settle(Duration::from_secs(300)), 0);
    assert_eq!(cache.pending(), 0);
    // Stored on disk: another process (a fresh cache) finds every one.
    let fresh = EmbeddingCache::default();
    assert!(SearchIndex::with_model(catalogue(), Arc::clone(&model), &fresh).encoder_vectors());
    let store = dir.path().join(format!(
        "{TOOL_VECTORS_PREFIX}{}",
        &model.weights_sha256()[..16]
    ));
    let stored = std::fs::read_dir(&store).unwrap().count();
    // A second catalogue soon after: the same loaded encoder computes its new definition.
    let mut more = catalogue();
    more.push(tool(
        "fs",
        "delete_file",
        "Remove a file for good.",
        &["path"],
    ));
    assert!(!SearchIndex::with_model(more.clone(), Arc::clone(&model), &cache).encoder_vectors());
    assert_eq!(cache.settle(Duration::from_secs(300)), 0);
    assert!(SearchIndex::with_model(more, model, &cache).encoder_vectors());
    assert_eq!(std::fs::read_dir(&store).unwrap().count(), stored + 1);
    assert_eq!(cache.encoder_loads(), 1, "the weights were loaded again");
}

#[test]
fn a_deadline_stops_encoding_and_what_was_done_is_kept() {
    let (_dir, model) = fresh_model();
    let texts = SearchIndex::encoder_texts(&catalogue());
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    let cache = EmbeddingCache::default();
    // A deadline already past: nothing is started.
    let past = std::time::Instant::now();
    assert_eq!(cache.encode_until(&model, &texts, Some(past)).unwrap(), 0);
    assert!(!SearchIndex::with_model(catalogue(), Arc::clone(&model), &cache).encoder_vectors());
    // No deadline: all of them.
    assert_eq!(
        cache.encode_until(&model, &texts, None).unwrap(),
        texts.len()
    );
    assert!(SearchIndex::with_model(catalogue(), model, &cache).encoder_vectors());
}

#[test]
fn prune_removes_vectors_unused_for_long_and_keeps_the_ones_an_index_reads() {
    let (dir, model) = fresh_model();
    let cache = EmbeddingCache::default();
    encode_all(&cache, &model, &catalogue());
    let store = dir.path().join(format!(
        "{TOOL_VECTORS_PREFIX}{}",
        &model.weights_sha256()[..16]
    ));
    let files: Vec<PathBuf> = std::fs::read_dir(&store)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let long_ago = std::time::SystemTime::now() - UNUSED_FOR - Duration::from_secs(3600);
    let age = |path: &PathBuf| {
        std::fs::File::options()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(long_ago)
            .unwrap();
    };
    // Every stored vector looks unused for longer than the limit...
    for file in &files {
        age(file);
    }
    // ...plus one of a definition no catalogue has any more, and a leftover temporary file.
    let gone = store.join(format!("{}.f32", "ab".repeat(32)));
    std::fs::copy(&files[0], &gone).unwrap();
    age(&gone);
    let temporary = store.join("cd.tmp4242");
    std::fs::write(&temporary, b"half").unwrap();
    age(&temporary);
    // An index of the catalogue reads its vectors from disk, which marks them used.
    let fresh = EmbeddingCache::default();
    assert!(SearchIndex::with_model(catalogue(), Arc::clone(&model), &fresh).encoder_vectors());
    let pruned = prune_store(&store);
    assert_eq!(pruned.removed, 1, "{pruned:?}");
    assert_eq!(pruned.temporary, 1, "{pruned:?}");
    assert_eq!(pruned.kept, files.len(), "{pruned:?}");
    assert!(!gone.exists() && !temporary.exists());
    // Control: the catalogue's vectors are all still there for a new process.
    let again = EmbeddingCache::default();
    assert!(SearchIndex::with_model(catalogue(), model, &again).encoder_vectors());
    // Left unread as long again, they go too.
    for file in &files {
        age(file);
    }
    assert_eq!(prune_store(&store).removed, files.len());
}

#[test]
fn the_same_tools_and_request_give_the_same_hybrid_ranking_and_vectors_are_cached() {
    let model = real_model();
    let cache = EmbeddingCache::default();
    let a = SearchIndex::with_model(catalogue(), Arc::clone(&model), &cache);
    assert_eq!(cache.len(), catalogue().len());
    let mut more = catalogue();
    more.push(tool(
        "fs",
        "write_file",
        "Create or overwrite a file.",
        &["path", "content"],
    ));
    let b = SearchIndex::with_model(more, model, &cache);
    // Only the new definition was embedded.
    assert_eq!(cache.len(), catalogue().len() + 1);
    for request in ["send a note to my boss", "weather", "commit my work"] {
        let x = a.search(request, 5);
        assert_eq!(x, a.search(request, 5));
        let y: Vec<_> = b
            .search(request, 5)
            .into_iter()
            .filter(|h| h.tool != "write_file")
            .collect();
        assert_eq!(x.first(), y.first(), "{request}");
    }
}

#[test]
fn without_the_model_the_search_is_by_words() {
    let index = SearchIndex::lexical(catalogue());
    assert_eq!(index.ranking(), Ranking::Lexical);
    let words = ToolIndex::build(catalogue());
    for request in ["read a file", "send an email", "stormy in Lisbon", "zebra"] {
        // Decision 0025's evidence by words is BM25F exactly.
        assert_eq!(
            index.search_tuned(request, 5, Ranking::Lexical, &Tuning::BASELINE),
            words.search(request, 5),
            "{request}"
        );
        // Asking for meaning without a model falls back to words.
        assert_eq!(
            index.search_by(request, 5, Ranking::Hybrid),
            index.search_by(request, 5, Ranking::Lexical),
            "{request}"
        );
        // The shipped evidence by words finds what BM25F finds first.
        let shipped = index.search(request, 5);
        assert_eq!(
            shipped.first().map(|h| &h.qualified),
            words.search(request, 5).first().map(|h| &h.qualified),
            "{request}"
        );
    }
    assert_eq!(first(&index.search("send an email", 5)), "mail__send_email");
    assert!(index.search("zebra", 5).is_empty());
}

// ---- Model files: digests, absence, format, distillation ----

/// A deterministic pseudo-random sequence in [-0.5, 0.5).
fn noise(seed: u64, n: usize) -> Vec<f32> {
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((x >> 40) as f32 / (1u64 << 24) as f32) - 0.5
        })
        .collect()
}

const VOCAB: &str = "[PAD]\n[UNK]\n[CLS]\n[SEP]\nread\nfile\nsend\nemail\nweather\n##s\n";

/// A one-layer BERT with `ATTENTION_HEADS`-wide hidden states over [`VOCAB`].
fn tiny_encoder() -> Vec<u8> {
    let dim = ATTENTION_HEADS;
    let inner = 2 * dim;
    let vocab = VOCAB.lines().count();
    let mut tensors: Vec<(String, Vec<usize>, Vec<f32>)> = vec![
        (
            "embeddings.word_embeddings.weight".into(),
            vec![vocab, dim],
            noise(1, vocab * dim),
        ),
        (
            "embeddings.position_embeddings.weight".into(),
            vec![8, dim],
            noise(2, 8 * dim),
        ),
        (
            "embeddings.token_type_embeddings.weight".into(),
            vec![2, dim],
            noise(3, 2 * dim),
        ),
        (
            "embeddings.LayerNorm.weight".into(),
            vec![dim],
            vec![1.0; dim],
        ),
        (
            "embeddings.LayerNorm.bias".into(),
            vec![dim],
            vec![0.0; dim],
        ),
    ];
    let p = "encoder.layer.0";
    for (i, (name, outputs, inputs)) in [
        ("attention.self.query", dim, dim),
        ("attention.self.key", dim, dim),
        ("attention.self.value", dim, dim),
        ("attention.output.dense", dim, dim),
        ("intermediate.dense", inner, dim),
        ("output.dense", dim, inner),
    ]
    .into_iter()
    .enumerate()
    {
        let seed = 10 + i as u64;
        tensors.push((
            format!("{p}.{name}.weight"),
            vec![outputs, inputs],
            noise(seed, outputs * inputs),
        ));
        tensors.push((
            format!("{p}.{name}.bias"),
            vec![outputs],
            noise(seed + 100, outputs),
        ));
    }
    for name in ["attention.output.LayerNorm", "output.LayerNorm"] {
        tensors.push((format!("{p}.{name}.weight"), vec![dim], vec![1.0; dim]));
        tensors.push((format!("{p}.{name}.bias"), vec![dim], vec![0.0; dim]));
    }
    let refs: Vec<(&str, &[usize], &[f32])> = tensors
        .iter()
        .map(|(n, s, d)| (n.as_str(), s.as_slice(), d.as_slice()))
        .collect();
    write_tensors(&refs)
}

fn hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Writes the tiny model into a new directory; returns it with the pin of its files.
fn tiny_model_dir() -> (tempfile::TempDir, ModelPin) {
    let dir = tempfile::tempdir().unwrap();
    let weights = tiny_encoder();
    std::fs::write(dir.path().join(WEIGHTS_FILE), &weights).unwrap();
    std::fs::write(dir.path().join(VOCAB_FILE), VOCAB).unwrap();
    let pin = ModelPin {
        weights_sha256: Box::leak(hex(&weights).into_boxed_str()),
        vocab_sha256: Box::leak(hex(VOCAB.as_bytes()).into_boxed_str()),
    };
    (dir, pin)
}

fn distilled_files(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(DISTILLED_PREFIX)
        })
        .collect()
}

#[test]
fn a_tiny_encoder_is_distilled_once_and_its_table_reused() {
    let (dir, pin) = tiny_model_dir();
    let model = Model::load_pinned(dir.path(), pin).unwrap();
    assert_eq!(model.dim(), ATTENTION_HEADS);
    let files = distilled_files(dir.path());
    assert_eq!(files.len(), 1, "{files:?}");
    let written = std::fs::metadata(&files[0]).unwrap().modified().unwrap();
    let v = model.embed("read files").unwrap();
    assert!((v.iter().map(|x| x * x).sum::<f32>() - 1.0).abs() < 1e-4);
    assert!(
        model.embed("zebra").is_none(),
        "unknown words have no vector"
    );

    let again = Model::load_pinned(dir.path(), pin).unwrap();
    assert_eq!(again.embed("read files").unwrap(), v);
    assert_eq!(
        std::fs::metadata(&files[0]).unwrap().modified().unwrap(),
        written
    );
    assert!(!dir.path().join("x.lock").exists());
}

#[test]
fn weights_whose_digest_differs_are_refused_with_the_file_named() {
    let (dir, pin) = tiny_model_dir();
    // Attack: the weights are swapped for other ones after install (one byte changed).
    let path = dir.path().join(WEIGHTS_FILE);
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x01;
    std::fs::write(&path, &bytes).unwrap();
    let err = Model::load_pinned(dir.path(), pin).unwrap_err();
    assert!(matches!(err, ModelError::HashMismatch { .. }), "{err:?}");
    let message = err.to_string();
    assert!(message.contains(&path.display().to_string()), "{message}");
    assert!(message.contains(pin.weights_sha256), "{message}");
    assert!(message.contains("refusing"), "{message}");
    assert!(
        distilled_files(dir.path()).is_empty(),
        "nothing is derived from refused weights"
    );

    // The pinned real model's digests refuse the tiny one too: Model::load accepts only
    // the model the install script brings.
    let (other, _) = tiny_model_dir();
    let err = Model::load(other.path()).unwrap_err();
    assert!(matches!(err, ModelError::HashMismatch { .. }), "{err:?}");

    // Positive control: the same files with their own digests load.
    let (good, pin) = tiny_model_dir();
    Model::load_pinned(good.path(), pin).unwrap();
}

#[test]
fn weights_swapped_after_the_table_was_distilled_are_refused_too() {
    // A load that finds the table distilled from the same weights file (by identity) does
    // not hash the weights again; a file swapped since is checked, and refused.
    let (dir, pin) = tiny_model_dir();
    Model::load_pinned(dir.path(), pin).unwrap();
    assert_eq!(distilled_files(dir.path()).len(), 1);
    Model::load_pinned(dir.path(), pin).unwrap();
    let path = dir.path().join(WEIGHTS_FILE);
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x01;
    std::fs::write(&path, &bytes).unwrap();
    let err = Model::load_pinned(dir.path(), pin).unwrap_err();
    assert!(matches!(err, ModelError::HashMismatch { .. }), "{err:?}");
    // Put back, the original bytes load again (checked, since the file changed).
    bytes[last] ^= 0x01;
    std::fs::write(&path, &bytes).unwrap();
    Model::load_pinned(dir.path(), pin).unwrap();
}

#[test]
fn a_changed_vocabulary_is_refused_too() {
    let (dir, pin) = tiny_model_dir();
    let path = dir.path().join(VOCAB_FILE);
    std::fs::write(&path, VOCAB.replace("email", "attack")).unwrap();
    let err = Model::load_pinned(dir.path(), pin).unwrap_err();
    assert!(
        matches!(err, ModelError::HashMismatch { ref path, .. } if path.ends_with(VOCAB_FILE)),
        "{err:?}"
    );
}

#[test]
fn a_missing_model_says_where_it_looked_and_how_to_install_it() {
    let dir = tempfile::tempdir().unwrap();
    let err = Model::load(&dir.path().join("nowhere")).unwrap_err();
    assert!(matches!(err, ModelError::Missing { .. }), "{err:?}");
    let message = err.to_string();
    assert!(message.contains("nowhere"), "{message}");
    assert!(message.contains("install-search-model"), "{message}");
    assert!(message.contains(MODEL_DIR_ENV), "{message}");
}

#[test]
fn a_file_that_is_not_an_encoder_is_refused_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let weights = write_tensors(&[("something.else", &[2, 2], &[0.0; 4])]);
    std::fs::write(dir.path().join(WEIGHTS_FILE), &weights).unwrap();
    std::fs::write(dir.path().join(VOCAB_FILE), VOCAB).unwrap();
    let pin = ModelPin {
        weights_sha256: Box::leak(hex(&weights).into_boxed_str()),
        vocab_sha256: Box::leak(hex(VOCAB.as_bytes()).into_boxed_str()),
    };
    let err = Model::load_pinned(dir.path(), pin).unwrap_err();
    assert!(matches!(err, ModelError::Format { .. }), "{err:?}");
    assert!(err.to_string().contains("word_embeddings"), "{err}");
}

/// A presentation server whose `add_slide` shares no word with a request for a
/// presentation, and tools of other servers.
fn slides() -> Vec<ToolDoc> {
    let mut docs = catalogue();
    docs.push(tool(
        "slides",
        "create_presentation",
        "Create a new presentation file.",
        &["title"],
    ));
    docs.push(tool(
        "slides",
        "add_slide",
        "Append an empty page to the open deck.",
        &["layout"],
    ));
    docs.push(tool(
        "slides",
        "save_presentation",
        "Write the presentation to disk.",
        &["path"],
    ));
    docs
}

fn rank_of(hits: &[warden_search::Hit], name: &str) -> Option<usize> {
    hits.iter().position(|h| h.qualified == name)
}

#[test]
fn feedback_from_the_tools_found_first_raises_their_neighbours() {
    let (_dir, model) = fresh_model();
    let cache = EmbeddingCache::default();
    encode_all(&cache, &model, &slides());
    let index = SearchIndex::with_model(slides(), model, &cache);
    assert!(index.encoder_vectors());
    // The shipped ranking (decision 0047): feedback, no request map (decision 0052).
    let with_feedback = Tuning {
        query_map: false,
        ..Tuning::default()
    };
    let without = Tuning {
        feedback: 0.0,
        ..with_feedback
    };
    let request = "make a presentation about cats";
    // Feedback alone: the tools nearest to the best tools found, in the encoder's space,
    // are the presentation server's three, add_slide among them though it shares no
    // word with the request.
    let only = Tuning {
        feedback: 1.0,
        ..with_feedback
    };
    let hits = index.search_tuned(request, 3, Ranking::Hybrid, &only);
    assert!(
        hits.iter().all(|h| h.server == "slides") && rank_of(&hits, "slides__add_slide").is_some(),
        "{hits:?}"
    );
    // Control: without feedback, the request's own words and vector rank add_slide below
    // the tools that say "presentation", and the shipped mix keeps those first.
    let control = index.search_tuned(request, 30, Ranking::Hybrid, &without);
    let shipped = index.search_tuned(request, 30, Ranking::Hybrid, &with_feedback);
    for hits in [&control, &shipped] {
        assert!(
            rank_of(hits, "slides__add_slide") > rank_of(hits, "slides__create_presentation"),
            "{hits:?}"
        );
    }
    let score = |hits: &[warden_search::Hit]| {
        hits.iter()
            .find(|h| h.tool == "add_slide")
            .map_or(0.0, |h| h.score)
    };
    assert!(
        score(&shipped) > score(&control),
        "add_slide {} without feedback, {} with",
        score(&control),
        score(&shipped)
    );
    // A request that finds nothing gets no feedback: still nothing.
    for noise in ["zebra quasar", "zebra. quasar, and xylophone then nebula"] {
        assert!(
            index
                .search_tuned(noise, 10, Ranking::Hybrid, &with_feedback)
                .is_empty(),
            "{noise}"
        );
    }
}

#[test]
fn the_request_map_applies_only_with_the_encoders_tool_vectors() {
    let (_dir, model) = fresh_model();
    let cache = EmbeddingCache::default();
    // Measured and not adopted (decision 0052): off unless asked for.
    assert!(!Tuning::default().query_map);
    let unmapped = Tuning::default();
    let mapped = Tuning {
        query_map: true,
        ..unmapped
    };
    let requests = [
        "will it be stormy in Lisbon this weekend",
        "book a plane ticket to Tokyo",
        "make a presentation about cats",
    ];
    // The static table's tool vectors (no encoder vectors yet): the same ranking either
    // way, scores included.
    let mut table = SearchIndex::with_model(slides(), Arc::clone(&model), &cache);
    assert!(!table.encoder_vectors());
    table.fit_query_map(QUERY_MAP_RIDGE);
    for request in requests {
        assert_eq!(
            table.search_tuned(request, 10, Ranking::Hybrid, &mapped),
            table.search_tuned(request, 10, Ranking::Hybrid, &unmapped),
            "{request}"
        );
    }
    // The encoder's: the map changes the semantic half (control: it does something).
    encode_all(&cache, &model, &slides());
    let mut encoder = SearchIndex::with_model(slides(), model, &cache);
    assert!(encoder.encoder_vectors());
    // Not fitted yet: asking for the map changes nothing.
    for request in requests {
        assert_eq!(
            encoder.search_tuned(request, 10, Ranking::Semantic, &mapped),
            encoder.search_tuned(request, 10, Ranking::Semantic, &unmapped),
            "{request}"
        );
    }
    encoder.fit_query_map(QUERY_MAP_RIDGE);
    assert!(requests.iter().any(|request| {
        encoder.search_tuned(request, 10, Ranking::Semantic, &mapped)
            != encoder.search_tuned(request, 10, Ranking::Semantic, &unmapped)
    }));
}

#[test]
fn mapped_requests_still_find_their_tools_and_noise_still_finds_nothing() {
    let (_dir, model) = fresh_model();
    let cache = EmbeddingCache::default();
    encode_all(&cache, &model, &slides());
    let mut index = SearchIndex::with_model(slides(), model, &cache);
    assert!(index.encoder_vectors());
    index.fit_query_map(QUERY_MAP_RIDGE);
    let mapped = Tuning {
        query_map: true,
        ..Tuning::default()
    };
    for (request, wanted) in [
        (
            "will it be stormy in Lisbon this weekend",
            "meteo__get_forecast",
        ),
        ("book a plane ticket to Tokyo", "travel__search_flights"),
        ("read a file", "fs__read_file"),
    ] {
        for ranking in [Ranking::Hybrid, Ranking::Semantic] {
            let hits = index.search_tuned(request, 3, ranking, &mapped);
            assert_eq!(first(&hits), wanted, "{request} ({ranking:?}): {hits:?}");
        }
    }
    // The map sends every request somewhere in the tools' space; the guard still reads
    // the request's own (static) cosines, so noise is not pulled to the nearest tool.
    for noise in ["zebra quasar", "zebra. quasar, and xylophone then nebula"] {
        assert!(
            index
                .search_tuned(noise, 10, Ranking::Hybrid, &mapped)
                .is_empty(),
            "{noise}"
        );
    }
    // Deterministic: the same index and request give the same hits.
    let request = "make a presentation about cats";
    assert_eq!(
        index.search_tuned(request, 10, Ranking::Hybrid, &mapped),
        index.search_tuned(request, 10, Ranking::Hybrid, &mapped)
    );
}

#[test]
fn a_padded_server_gains_nothing_from_feedback_or_the_request_map() {
    let (_dir, model) = fresh_model();
    // Forty tools whose descriptions list the catalogue's words: near every tool, so a
    // feedback query built from any request's best tools is near them too.
    let words = "file directory git commit status time timezone weather message email \
                 read write create list send forecast";
    let mut docs = catalogue();
    for i in 0..40 {
        docs.push(tool(
            "evil",
            &format!("anything_{i}"),
            &format!("{words} ").repeat(50),
            &[],
        ));
    }
    let cache = EmbeddingCache::default();
    encode_all(&cache, &model, &docs);
    let index = SearchIndex::with_model(docs, model, &cache);
    assert!(index.encoder_vectors());
    // The shipped ranking has feedback; the request map (measured, not adopted; decision
    // 0052) is fitted on every tool, the forty padded ones included.
    let mut index = index;
    index.fit_query_map(QUERY_MAP_RIDGE);
    let mapped = Tuning {
        query_map: true,
        ..Tuning::default()
    };
    for (query, want, tuning) in [
        ("read a file", "fs__read_file"),
        ("commit my work", "git__git_commit"),
        ("send a note to my boss", "mail__send_email"),
        ("will it rain tomorrow", "meteo__get_forecast"),
    ]
    .into_iter()
    .flat_map(|(q, w)| [(q, w, Tuning::default()), (q, w, mapped)])
    {
        let hits = index.search_tuned(query, 3, Ranking::Hybrid, &tuning);
        assert!(
            rank_of(&hits, want).is_some(),
            "{query}: {want} not in {hits:?}"
        );
        assert!(
            !hits[0].qualified.starts_with("evil__"),
            "{query}: {hits:?}"
        );
    }
}
