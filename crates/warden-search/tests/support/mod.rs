//! A small, realistic catalogue of MCP tools shared by the tests.

#![allow(dead_code)]

use serde_json::{Value, json};
use warden_search::ToolDoc;

/// A tool of `server` named `name`, with a description and string parameters
/// `(name, description)`.
pub fn tool(server: &str, name: &str, description: &str, params: &[(&str, &str)]) -> ToolDoc {
    let mut properties = serde_json::Map::new();
    for (param, text) in params {
        properties.insert(
            (*param).to_owned(),
            json!({"type": "string", "description": text}),
        );
    }
    ToolDoc {
        qualified: format!("{server}__{name}"),
        server: server.to_owned(),
        tool: name.to_owned(),
        title: None,
        description: Some(description.to_owned()),
        input_schema: json!({"type": "object", "properties": Value::Object(properties)}),
        instructions: None,
    }
}

/// Twenty tools from six servers, written like the reference servers' definitions.
pub fn catalogue() -> Vec<ToolDoc> {
    vec![
        tool(
            "filesystem",
            "read_file",
            "Read the complete contents of a file from the file system. Handles various text encodings.",
            &[("path", "Path of the file to read")],
        ),
        tool(
            "filesystem",
            "write_file",
            "Create a new file or completely overwrite an existing file with new content.",
            &[("path", "Path of the file"), ("content", "Text to write")],
        ),
        tool(
            "filesystem",
            "list_directory",
            "Get a detailed listing of all files and directories in a specified path.",
            &[("path", "Directory path")],
        ),
        tool(
            "filesystem",
            "create_directory",
            "Create a new directory or ensure a directory exists, creating parent folders as needed.",
            &[("path", "Directory to create")],
        ),
        tool(
            "filesystem",
            "move_file",
            "Move or rename files and directories.",
            &[("source", "Current path"), ("destination", "New path")],
        ),
        tool(
            "filesystem",
            "search_files",
            "Recursively search for files and directories matching a pattern.",
            &[
                ("path", "Where to start"),
                ("pattern", "Glob pattern to match"),
            ],
        ),
        tool(
            "git",
            "git_status",
            "Shows the working tree status of a repository.",
            &[("repo_path", "Path to the Git repository")],
        ),
        tool(
            "git",
            "git_commit",
            "Records changes to the repository with a commit message.",
            &[
                ("repo_path", "Path to the Git repository"),
                ("message", "Commit message"),
            ],
        ),
        tool(
            "git",
            "git_diff",
            "Shows differences between the working directory and the index or a branch.",
            &[
                ("repo_path", "Path to the Git repository"),
                ("target", "Branch or commit"),
            ],
        ),
        tool(
            "git",
            "git_log",
            "Shows the commit logs of a repository.",
            &[
                ("repo_path", "Path to the Git repository"),
                ("max_count", "How many commits"),
            ],
        ),
        tool(
            "time",
            "get_current_time",
            "Get the current time in a specific timezone.",
            &[("timezone", "IANA timezone name, e.g. Europe/London")],
        ),
        tool(
            "time",
            "convert_time",
            "Convert time between timezones.",
            &[
                ("source_timezone", "Source IANA timezone"),
                ("time", "Time in 24-hour format HH:MM"),
                ("target_timezone", "Target IANA timezone"),
            ],
        ),
        tool(
            "fetch",
            "fetch",
            "Fetches a URL from the internet and extracts its contents as markdown.",
            &[
                ("url", "URL to fetch"),
                ("max_length", "Maximum number of characters"),
            ],
        ),
        tool(
            "memory",
            "create_entities",
            "Create multiple new entities in the knowledge graph.",
            &[("entities", "Entities to create")],
        ),
        tool(
            "memory",
            "search_nodes",
            "Search for nodes in the knowledge graph based on a query.",
            &[(
                "query",
                "Text to match against entity names and observations",
            )],
        ),
        tool(
            "memory",
            "delete_entities",
            "Delete multiple entities and their relations from the knowledge graph.",
            &[("entityNames", "Names of the entities to delete")],
        ),
        tool(
            "github",
            "create_issue",
            "Create a new issue in a GitHub repository.",
            &[
                ("owner", "Repository owner"),
                ("repo", "Repository name"),
                ("title", "Issue title"),
            ],
        ),
        tool(
            "github",
            "create_pull_request",
            "Create a new pull request in a GitHub repository.",
            &[
                ("head", "Branch with the changes"),
                ("base", "Branch to merge into"),
            ],
        ),
        tool(
            "slack",
            "slack_post_message",
            "Post a new message to a Slack channel.",
            &[
                ("channel_id", "The channel to post to"),
                ("text", "The message text"),
            ],
        ),
        tool(
            "weather",
            "get_forecast",
            "Get the weather forecast for a location.",
            &[
                ("latitude", "Latitude of the location"),
                ("longitude", "Longitude of the location"),
            ],
        ),
    ]
}
