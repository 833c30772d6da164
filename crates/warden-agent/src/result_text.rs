//! A tool result turned into the text the model reads: the host core's rule
//! ([`warden_host::result_text`]), the same text a session labels into its provenance.

pub use warden_host::result_text::result_text;
