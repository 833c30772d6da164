//! Which model to talk to, and how: the `[model]` settings turned into a [`Model`].

use std::time::Duration;

use super::{Anthropic, Model, ModelError, OpenAi, RetryPolicy};

/// The wire format spoken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    /// The Anthropic Messages API.
    Anthropic,
    /// OpenAI Chat Completions, or any compatible endpoint.
    OpenAi,
}

impl Provider {
    /// Parses `anthropic`, `openai` (also `openai-compatible`, `ollama`, `vllm`).
    pub fn parse(name: &str) -> Result<Provider, ModelError> {
        match name.to_ascii_lowercase().as_str() {
            "anthropic" | "claude" => Ok(Provider::Anthropic),
            "openai" | "openai-compatible" | "ollama" | "vllm" | "llamacpp" | "llama.cpp" => {
                Ok(Provider::OpenAi)
            }
            other => Err(ModelError::Settings(format!(
                "unknown provider `{other}` (expected `anthropic` or `openai`; any \
                 OpenAI-compatible endpoint is `openai` with a base_url)"
            ))),
        }
    }

    /// The base URL used when none is configured.
    pub fn default_base_url(self) -> &'static str {
        match self {
            Provider::Anthropic => "https://api.anthropic.com",
            Provider::OpenAi => "https://api.openai.com/v1",
        }
    }

    /// The environment variable the API key is read from by default.
    pub fn default_key_variable(self) -> &'static str {
        match self {
            Provider::Anthropic => "ANTHROPIC_API_KEY",
            Provider::OpenAi => "OPENAI_API_KEY",
        }
    }
}

/// Everything needed to reach a model.
#[derive(Debug, Clone)]
pub struct ModelSettings {
    /// The wire format.
    pub provider: Provider,
    /// The model's name at the provider.
    pub name: String,
    /// The endpoint; `None` for the provider's own.
    pub base_url: Option<String>,
    /// The variable holding the API key; `None` for the provider's usual one.
    pub api_key_env: Option<String>,
    /// Longest wait for the first byte of a reply and between streamed pieces.
    pub idle_timeout: Duration,
    /// Retries of transient failures.
    pub retry: RetryPolicy,
}

/// Builds the model client `settings` describe, reading the API key with `lookup` (the
/// process environment, in the binary). A key is required unless the endpoint is on this
/// machine (a local Ollama or vLLM needs none), and a key is never sent over plain HTTP to
/// another machine.
pub fn build(
    settings: &ModelSettings,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Box<dyn Model>, ModelError> {
    let base = settings
        .base_url
        .clone()
        .unwrap_or_else(|| settings.provider.default_base_url().to_owned());
    let url = warden_net::reqwest::Url::parse(&base)
        .map_err(|error| ModelError::Settings(format!("base_url {base:?}: {error}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(ModelError::Settings(format!(
            "base_url {base:?}: not an http(s) URL"
        )));
    }
    let local = warden_net::is_loopback_url(&url);
    let variable = settings
        .api_key_env
        .clone()
        .unwrap_or_else(|| settings.provider.default_key_variable().to_owned());
    let api_key = lookup(&variable).filter(|key| !key.trim().is_empty());
    if api_key.is_none() && !local {
        return Err(ModelError::Settings(format!(
            "no API key: set {variable} (or `api_key_env` in [model]) for {base}"
        )));
    }
    if api_key.is_some() && url.scheme() == "http" && !local {
        return Err(ModelError::Settings(format!(
            "refusing to send the API key over plain http to {base}; use https"
        )));
    }
    let http = warden_net::client(&warden_net::HttpOptions {
        read_idle_timeout: settings.idle_timeout,
        ..warden_net::HttpOptions::default()
    })
    .map_err(|error| ModelError::Settings(error.to_string()))?;
    Ok(match settings.provider {
        Provider::Anthropic => Box::new(Anthropic::new(
            http,
            &base,
            &settings.name,
            api_key,
            settings.retry,
        )),
        Provider::OpenAi => Box::new(OpenAi::new(
            http,
            &base,
            &settings.name,
            api_key,
            settings.retry,
        )),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(provider: Provider, base: Option<&str>) -> ModelSettings {
        ModelSettings {
            provider,
            name: "m".into(),
            base_url: base.map(str::to_owned),
            api_key_env: None,
            idle_timeout: Duration::from_secs(5),
            retry: RetryPolicy::none(),
        }
    }

    #[test]
    fn keys_are_required_remotely_and_never_sent_in_the_clear() {
        let none = |_: &str| None;
        let key = |_: &str| Some("sk-test".to_owned());
        let error = build(&settings(Provider::Anthropic, None), &none)
            .err()
            .unwrap();
        assert!(error.to_string().contains("ANTHROPIC_API_KEY"), "{error}");
        assert!(
            build(
                &settings(Provider::OpenAi, Some("http://127.0.0.1:11434/v1")),
                &none
            )
            .is_ok()
        );
        let error = build(
            &settings(Provider::OpenAi, Some("http://gpu.example:8000/v1")),
            &key,
        )
        .err()
        .unwrap();
        assert!(error.to_string().contains("plain http"), "{error}");
        assert!(build(&settings(Provider::OpenAi, None), &key).is_ok());
        assert!(Provider::parse("gemini").is_err());
        assert_eq!(Provider::parse("Ollama").unwrap(), Provider::OpenAi);
    }
}
