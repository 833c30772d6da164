//! Runs every checked-in input of `fuzz/corpus/TARGET/` through its target's checks under
//! plain `cargo test`: the seeds stay valid inputs, and every finding committed there
//! (named `finding-*`) stays fixed, without the fuzzing engine.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

#[test]
fn every_corpus_input_passes_its_target() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let mut total = 0;
    for (name, run) in warden_fuzz::TARGETS {
        let dir = root.join(name);
        let mut entries: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|entry| entry.unwrap().path())
            .collect();
        entries.sort();
        assert!(!entries.is_empty(), "target {name} has no seed");
        for path in entries {
            let data = std::fs::read(&path).unwrap();
            let outcome = std::panic::catch_unwind(|| run(&data));
            assert!(outcome.is_ok(), "{} fails its target", path.display());
            total += 1;
        }
    }
    assert!(total >= warden_fuzz::TARGETS.len());
}
