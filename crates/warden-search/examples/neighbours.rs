//! Prints, for each word given, the vocabulary's nearest words under the search model
//! (a quick look at what the distilled table learned).
//!
//! ```text
//! cargo run --release -p warden-search --example neighbours -- MODEL_DIR WORD...
//! ```

use std::error::Error;
use std::path::Path;

use warden_search::semantic::Model;

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((dir, words)) = args.split_first() else {
        return Err("usage: neighbours MODEL_DIR WORD...".into());
    };
    let model = Model::load(Path::new(dir))?;
    let pairs = [
        ("weather forecast", "meteorological conditions"),
        ("weather forecast", "stock price history"),
        ("send an email", "compose a message to a mailbox"),
        ("send an email", "list files in a directory"),
        ("convert word document to pdf", "export docx as PDF"),
        ("convert word document to pdf", "search flights"),
    ];
    for (a, b) in pairs {
        let (Some(x), Some(y)) = (model.embed(a), model.embed(b)) else {
            continue;
        };
        let cos: f32 = x.iter().zip(&y).map(|(p, q)| p * q).sum();
        println!("{cos:.3}  {a:?} ~ {b:?}");
    }
    for word in words {
        println!("{word}: {:?}", model.nearest_words(word, 8));
    }
    Ok(())
}
