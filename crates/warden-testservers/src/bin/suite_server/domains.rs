//! The tools of each domain: names, descriptions, input schemas and annotations, written
//! the way a careful server author would, and what each one does with the world.

use serde_json::{Value, json};

/// The domains, as the first argument names them.
pub(crate) const NAMES: [&str; 4] = ["workspace", "banking", "travel", "chat"];

/// What a tool does with the world.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Behaviour {
    /// Returns the records of a collection that match the filters `(argument, field)`.
    Read {
        collection: &'static str,
        filters: &'static [(&'static str, &'static str)],
    },
    /// Records the call as an effect and adds its arguments to a collection.
    Write { collection: &'static str },
    /// A read that reaches a place outside (a web page): recorded as an effect (the visit),
    /// then answered like [`Behaviour::Read`].
    Fetch {
        collection: &'static str,
        filters: &'static [(&'static str, &'static str)],
    },
}

/// One tool.
#[derive(Debug, Clone)]
pub(crate) struct ToolDef {
    pub(crate) name: &'static str,
    description: &'static str,
    properties: Value,
    required: &'static [&'static str],
    /// `(readOnlyHint, destructiveHint, openWorldHint)`.
    hints: (bool, bool, bool),
    pub(crate) behaviour: Behaviour,
}

impl ToolDef {
    /// The `tools/list` entry.
    pub(crate) fn definition(&self) -> Value {
        let (read_only, destructive, open_world) = self.hints;
        let mut annotations = json!({"readOnlyHint": read_only, "openWorldHint": open_world});
        if !read_only {
            annotations["destructiveHint"] = json!(destructive);
        }
        json!({
            "name": self.name,
            "description": self.description,
            "inputSchema": {
                "type": "object",
                "properties": self.properties,
                "required": self.required,
            },
            "annotations": annotations,
        })
    }
}

const NONE: &[(&str, &str)] = &[];

fn read(
    name: &'static str,
    description: &'static str,
    properties: Value,
    required: &'static [&'static str],
    open_world: bool,
    collection: &'static str,
    filters: &'static [(&'static str, &'static str)],
) -> ToolDef {
    ToolDef {
        name,
        description,
        properties,
        required,
        hints: (true, false, open_world),
        behaviour: Behaviour::Read {
            collection,
            filters,
        },
    }
}

fn write(
    name: &'static str,
    description: &'static str,
    properties: Value,
    required: &'static [&'static str],
    destructive: bool,
    open_world: bool,
    collection: &'static str,
) -> ToolDef {
    ToolDef {
        name,
        description,
        properties,
        required,
        hints: (false, destructive, open_world),
        behaviour: Behaviour::Write { collection },
    }
}

fn string(description: &str) -> Value {
    json!({"type": "string", "description": description})
}

fn emails(description: &str) -> Value {
    json!({"type": "array", "items": {"type": "string", "format": "email"}, "description": description})
}

/// The tools of `domain`, or `None` for an unknown domain.
pub(crate) fn tools(domain: &str) -> Option<Vec<ToolDef>> {
    Some(match domain {
        "workspace" => workspace(),
        "banking" => banking(),
        "travel" => travel(),
        "chat" => chat(),
        _ => return None,
    })
}

fn workspace() -> Vec<ToolDef> {
    vec![
        read(
            "search_emails",
            "Searches the user's mailbox; matches the query against subject and body, optionally only mail from one sender.",
            json!({"query": string("Words to look for."), "sender": string("Only mail from this address.")}),
            &["query"],
            true,
            "emails",
            &[("query", "body"), ("sender", "sender")],
        ),
        read(
            "list_unread_emails",
            "Lists the unread mail in the user's inbox.",
            json!({}),
            &[],
            true,
            "emails",
            NONE,
        ),
        write(
            "send_email",
            "Sends an email from the user's account.",
            json!({"recipients": emails("Who receives it."), "cc": emails("Copied recipients."),
                   "subject": string("Subject line."), "body": string("The text of the message.")}),
            &["recipients", "subject", "body"],
            false,
            true,
            "sent",
        ),
        write(
            "mark_email_read",
            "Marks one email in the user's inbox as read.",
            json!({"email_id": string("The id of the email.")}),
            &["email_id"],
            false,
            false,
            "read_marks",
        ),
        write(
            "delete_email",
            "Deletes one email from the user's mailbox.",
            json!({"email_id": string("The id of the email.")}),
            &["email_id"],
            true,
            false,
            "deleted",
        ),
        read(
            "get_day_events",
            "Lists the events in the user's calendar on one day.",
            json!({"day": {"type": "string", "format": "date", "description": "YYYY-MM-DD"}}),
            &["day"],
            false,
            "events",
            &[("day", "start_time")],
        ),
        read(
            "search_events",
            "Searches the user's calendar by title or description.",
            json!({"query": string("Words to look for.")}),
            &["query"],
            false,
            "events",
            &[("query", "title")],
        ),
        write(
            "create_event",
            "Creates an event in the user's calendar; participants, if any, are sent an invitation.",
            json!({"title": string("Title."), "start_time": {"type": "string", "format": "date-time"},
                   "end_time": {"type": "string", "format": "date-time"}, "description": string("Notes."),
                   "location": string("Where."), "participants": emails("Invited people.")}),
            &["title", "start_time", "end_time"],
            false,
            false,
            "events",
        ),
        write(
            "reschedule_event",
            "Moves one of the user's calendar events to a new time.",
            json!({"event_id": string("The id of the event."), "new_start_time": {"type": "string", "format": "date-time"},
                   "new_end_time": {"type": "string", "format": "date-time"}}),
            &["event_id", "new_start_time"],
            false,
            false,
            "reschedules",
        ),
        write(
            "cancel_event",
            "Cancels one of the user's calendar events.",
            json!({"event_id": string("The id of the event.")}),
            &["event_id"],
            true,
            false,
            "cancelled",
        ),
        read(
            "list_files",
            "Lists the files in the user's cloud drive with their ids and sizes.",
            json!({}),
            &[],
            false,
            "files",
            NONE,
        ),
        read(
            "search_files",
            "Searches the user's cloud drive by file name.",
            json!({"query": string("Part of a file name.")}),
            &["query"],
            false,
            "files",
            &[("query", "filename")],
        ),
        read(
            "read_file",
            "Returns one file of the user's cloud drive.",
            json!({"file_id": string("The id of the file.")}),
            &["file_id"],
            false,
            "files",
            &[("file_id", "id")],
        ),
        write(
            "create_file",
            "Creates a file in the user's cloud drive.",
            json!({"filename": string("Name of the new file."), "content": string("Its text.")}),
            &["filename", "content"],
            false,
            false,
            "files",
        ),
        write(
            "append_to_file",
            "Appends text to a file in the user's cloud drive.",
            json!({"file_id": string("The id of the file."), "content": string("Text to append.")}),
            &["file_id", "content"],
            false,
            false,
            "appends",
        ),
        write(
            "delete_file",
            "Deletes a file from the user's cloud drive.",
            json!({"file_id": string("The id of the file.")}),
            &["file_id"],
            true,
            false,
            "deleted_files",
        ),
        write(
            "share_file",
            "Shares a file of the user's drive with someone.",
            json!({"file_id": string("The id of the file."), "email": {"type": "string", "format": "email"},
                   "permission": {"type": "string", "enum": ["r", "rw"]}}),
            &["file_id", "email", "permission"],
            false,
            true,
            "shares",
        ),
    ]
}

fn banking() -> Vec<ToolDef> {
    vec![
        read(
            "get_balance",
            "The balance of the user's account.",
            json!({}),
            &[],
            false,
            "balance",
            NONE,
        ),
        read(
            "get_iban",
            "The IBAN of the user's account.",
            json!({}),
            &[],
            false,
            "account",
            NONE,
        ),
        read(
            "get_transactions",
            "The most recent transactions of the user's account.",
            json!({"n": {"type": "integer", "description": "How many."}}),
            &[],
            false,
            "transactions",
            NONE,
        ),
        read(
            "get_scheduled_transactions",
            "The user's scheduled and recurring transactions.",
            json!({}),
            &[],
            false,
            "scheduled",
            NONE,
        ),
        read(
            "read_document",
            "Reads one document from the user's banking inbox (bills, letters).",
            json!({"file_name": string("The document's name.")}),
            &["file_name"],
            false,
            "documents",
            &[("file_name", "name")],
        ),
        write(
            "send_money",
            "Sends money from the user's account.",
            json!({"recipient": string("The IBAN to pay."), "amount": {"type": "number"},
                   "subject": string("Shown to the recipient."), "date": {"type": "string", "format": "date"}}),
            &["recipient", "amount", "subject"],
            false,
            true,
            "transactions",
        ),
        write(
            "schedule_transaction",
            "Schedules a future, possibly recurring, payment.",
            json!({"recipient": string("The IBAN to pay."), "amount": {"type": "number"},
                   "subject": string("Shown to the recipient."), "date": {"type": "string", "format": "date"},
                   "recurring": {"type": "boolean"}}),
            &["recipient", "amount", "subject", "date"],
            false,
            true,
            "scheduled",
        ),
        write(
            "update_scheduled_transaction",
            "Changes a scheduled transaction.",
            json!({"id": {"type": "integer"}, "recipient": string("New IBAN."), "amount": {"type": "number"},
                   "date": {"type": "string", "format": "date"}, "subject": string("New subject.")}),
            &["id"],
            false,
            true,
            "scheduled_updates",
        ),
        read(
            "get_user_info",
            "The user's name and address as the bank knows them.",
            json!({}),
            &[],
            false,
            "user",
            NONE,
        ),
        write(
            "update_user_info",
            "Updates the user's postal address at the bank.",
            json!({"street": string("Street and number."), "city": string("City.")}),
            &[],
            false,
            false,
            "user_updates",
        ),
        write(
            "update_password",
            "Changes the password of the user's online banking.",
            json!({"password": string("The new password.")}),
            &["password"],
            true,
            false,
            "passwords",
        ),
    ]
}

fn travel() -> Vec<ToolDef> {
    vec![
        read(
            "list_hotels",
            "Hotels in a city, with their price range.",
            json!({"city": string("City.")}),
            &["city"],
            true,
            "hotels",
            &[("city", "city")],
        ),
        read(
            "get_hotel_reviews",
            "Ratings and reviews of hotels, written by guests.",
            json!({"hotel_names": {"type": "array", "items": {"type": "string"}}}),
            &["hotel_names"],
            true,
            "hotel_reviews",
            &[("hotel_names", "hotel")],
        ),
        read(
            "list_restaurants",
            "Restaurants in a city, with cuisine and price.",
            json!({"city": string("City.")}),
            &["city"],
            true,
            "restaurants",
            &[("city", "city")],
        ),
        read(
            "get_restaurant_reviews",
            "Ratings and reviews of restaurants, written by guests.",
            json!({"restaurant_names": {"type": "array", "items": {"type": "string"}}}),
            &["restaurant_names"],
            true,
            "restaurant_reviews",
            &[("restaurant_names", "restaurant")],
        ),
        read(
            "get_user_profile",
            "The user's travel profile: name, passport number, card on file.",
            json!({}),
            &[],
            false,
            "profile",
            NONE,
        ),
        write(
            "reserve_hotel",
            "Books a hotel room in the user's name and charges the card on file.",
            json!({"hotel": string("The hotel's name."), "start_day": {"type": "string", "format": "date"},
                   "end_day": {"type": "string", "format": "date"}}),
            &["hotel", "start_day", "end_day"],
            false,
            true,
            "hotel_bookings",
        ),
        write(
            "reserve_restaurant",
            "Books a table in the user's name.",
            json!({"restaurant": string("The restaurant's name."), "start_time": {"type": "string", "format": "date-time"}}),
            &["restaurant", "start_time"],
            false,
            true,
            "table_bookings",
        ),
        write(
            "send_email",
            "Sends an email from the user's account.",
            json!({"recipients": emails("Who receives it."), "subject": string("Subject line."), "body": string("The text of the message.")}),
            &["recipients", "subject", "body"],
            false,
            true,
            "sent",
        ),
        write(
            "create_event",
            "Adds an event to the user's own calendar (no invitations).",
            json!({"title": string("Title."), "start_time": {"type": "string", "format": "date-time"},
                   "end_time": {"type": "string", "format": "date-time"}, "location": string("Where.")}),
            &["title", "start_time", "end_time"],
            false,
            false,
            "events",
        ),
    ]
}

fn chat() -> Vec<ToolDef> {
    vec![
        read(
            "list_channels",
            "The channels of the team's chat workspace.",
            json!({}),
            &[],
            false,
            "channels",
            NONE,
        ),
        read(
            "read_channel_messages",
            "The messages of one channel.",
            json!({"channel": string("Channel name.")}),
            &["channel"],
            false,
            "messages",
            &[("channel", "channel")],
        ),
        read(
            "read_inbox",
            "The direct messages a user received.",
            json!({"user": string("User name.")}),
            &["user"],
            false,
            "direct",
            &[("user", "recipient")],
        ),
        read(
            "list_users",
            "Members of the workspace, or of one channel.",
            json!({"channel": string("Only members of this channel.")}),
            &[],
            false,
            "users",
            &[("channel", "channels")],
        ),
        write(
            "send_direct_message",
            "Sends a direct message to one member.",
            json!({"recipient": string("User name."), "body": string("The message.")}),
            &["recipient", "body"],
            false,
            false,
            "direct",
        ),
        write(
            "send_channel_message",
            "Posts a message in a channel.",
            json!({"channel": string("Channel name."), "body": string("The message.")}),
            &["channel", "body"],
            false,
            false,
            "messages",
        ),
        write(
            "add_user_to_channel",
            "Adds a member of the workspace to a channel.",
            json!({"user": string("User name."), "channel": string("Channel name.")}),
            &["user", "channel"],
            false,
            false,
            "memberships",
        ),
        write(
            "invite_user",
            "Invites someone to the workspace by email.",
            json!({"user": string("User name."), "user_email": {"type": "string", "format": "email"}}),
            &["user", "user_email"],
            false,
            true,
            "invitations",
        ),
        write(
            "remove_user",
            "Removes a member from the workspace.",
            json!({"user": string("User name.")}),
            &["user"],
            true,
            false,
            "removals",
        ),
        ToolDef {
            name: "get_webpage",
            description: "Fetches a web page.",
            properties: json!({"url": {"type": "string", "format": "uri"}}),
            required: &["url"],
            hints: (true, false, true),
            behaviour: Behaviour::Fetch {
                collection: "webpages",
                filters: &[("url", "url")],
            },
        },
        write(
            "post_webpage",
            "Publishes text at a URL.",
            json!({"url": {"type": "string", "format": "uri"}, "content": string("The text.")}),
            &["url", "content"],
            false,
            true,
            "published",
        ),
    ]
}
