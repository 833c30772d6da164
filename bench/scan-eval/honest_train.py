"""Honest tool definitions of everyday domains, for the TRAINING side only.

A compositional generator (standard library, its own seeded RNG, so it never changes the
other records of the sets) that writes definitions the way real servers write them: mail,
calendar and contacts, banking and payments, shopping, travel, team chat, files and
drives, code hosting, databases, shells, notes and tasks, cloud operations, maps, weather
and web search. It mixes the registers honest authors use: third-person summaries
("Moves a message to the Archive folder."), imperatives ("Create an event."), "Use
this tool to ...", usage advice naming the server's own tools, security-sounding facts
("Requires an API token with the repo scope.", "Deletes the file permanently."), and short
parameter documentation ("Recipient IBAN.", "New amount.", "Recipient's email address.").
The two honest definitions the scanner used to flag (issue 17: "Marks one email in the
user's inbox as read.", a parameter "New IBAN.") are deliberately not generated here.

The held-out counterpart, honest_eval.py, was written separately, by hand, in other words,
and is never read by training. Written for Warden (Apache-2.0).
"""

import random

R = random.Random(2026)


def pick(bank):
    return R.choice(bank)


def cap(text):
    return text[0].upper() + text[1:] if text else text


# Per domain: entities (singular, plural), verbs that fit them, and parameter docs.
# A verb is (imperative, third person, past participle).
V = {
    "get": ("get", "gets", "got"),
    "list": ("list", "lists", "listed"),
    "search": ("search", "searches", "searched"),
    "create": ("create", "creates", "created"),
    "update": ("update", "updates", "updated"),
    "delete": ("delete", "deletes", "deleted"),
    "send": ("send", "sends", "sent"),
    "mark": ("mark", "marks", "marked"),
    "move": ("move", "moves", "moved"),
    "archive": ("archive", "archives", "archived"),
    "reply": ("reply to", "replies to", "replied to"),
    "forward": ("forward", "forwards", "forwarded"),
    "cancel": ("cancel", "cancels", "cancelled"),
    "book": ("book", "books", "booked"),
    "schedule": ("schedule", "schedules", "scheduled"),
    "share": ("share", "shares", "shared"),
    "upload": ("upload", "uploads", "uploaded"),
    "download": ("download", "downloads", "downloaded"),
    "read": ("read", "reads", "read"),
    "write": ("write", "writes", "written"),
    "rename": ("rename", "renames", "renamed"),
    "copy": ("copy", "copies", "copied"),
    "run": ("run", "runs", "run"),
    "execute": ("execute", "executes", "executed"),
    "merge": ("merge", "merges", "merged"),
    "close": ("close", "closes", "closed"),
    "open": ("open", "opens", "opened"),
    "post": ("post", "posts", "posted"),
    "invite": ("invite", "invites", "invited"),
    "pay": ("pay", "pays", "paid"),
    "transfer": ("transfer", "transfers", "transferred"),
    "refund": ("refund", "refunds", "refunded"),
    "export": ("export", "exports", "exported"),
    "import": ("import", "imports", "imported"),
    "restore": ("restore", "restores", "restored"),
    "rotate": ("rotate", "rotates", "rotated"),
    "revoke": ("revoke", "revokes", "revoked"),
    "add": ("add", "adds", "added"),
    "remove": ("remove", "removes", "removed"),
    "approve": ("approve", "approves", "approved"),
    "check": ("check", "checks", "checked"),
    "fetch": ("fetch", "fetches", "fetched"),
    "summarize": ("summarize", "summarizes", "summarized"),
    "snooze": ("snooze", "snoozes", "snoozed"),
    "pin": ("pin", "pins", "pinned"),
    "react": ("react to", "reacts to", "reacted to"),
    "subscribe": ("subscribe to", "subscribes to", "subscribed to"),
    "kill": ("kill", "kills", "killed"),
    "deploy": ("deploy", "deploys", "deployed"),
    "query": ("query", "queries", "queried"),
    "insert": ("insert", "inserts", "inserted"),
    "flag": ("flag", "flags", "flagged"),
    "label": ("label", "labels", "labelled"),
    "attach": ("attach", "attaches", "attached"),
    "reschedule": ("reschedule", "reschedules", "rescheduled"),
    "confirm": ("confirm", "confirms", "confirmed"),
    "lock": ("lock", "locks", "locked"),
    "freeze": ("freeze", "freezes", "frozen"),
}

DOMAINS = {
    "mail": {
        "owner": ["the user's inbox", "the mailbox", "the signed-in account", "the user's mail account", "a folder", "the Sent folder"],
        "entities": [
            ("email", "emails", ["get", "list", "search", "send", "mark", "move", "archive", "reply", "forward", "delete", "flag", "label", "snooze"]),
            ("message", "messages", ["get", "list", "search", "mark", "move", "archive", "delete", "forward", "flag"]),
            ("thread", "threads", ["get", "list", "archive", "mark", "delete", "label"]),
            ("draft", "drafts", ["create", "update", "send", "delete", "list"]),
            ("label", "labels", ["create", "list", "delete", "rename"]),
            ("attachment", "attachments", ["download", "list", "get", "attach"]),
            ("mail filter", "mail filters", ["create", "list", "delete"]),
            ("signature", "signatures", ["get", "update"]),
            ("contact", "contacts", ["get", "list", "search", "create", "update", "delete"]),
        ],
        "params": [
            ("email_id", "ID of the email."), ("message_id", "The message ID, as returned by search_emails."),
            ("to", "Recipient email addresses."), ("to", "The recipient's email address."), ("cc", "Addresses to copy (CC)."),
            ("bcc", "Blind-copy recipients, if any."), ("subject", "Subject line."), ("body", "The email body, plain text or HTML."),
            ("query", "Search query, e.g. from:alice subject:invoice."), ("folder", "Folder to move the message to, such as Archive."),
            ("unread_only", "If true, only unread messages are returned."), ("label", "Name of the label to apply."),
            ("read", "Whether to mark the message as read (true) or unread (false)."), ("reply_all", "Reply to all recipients of the thread."),
            ("sender", "Filter by sender address."), ("since", "Only emails received after this date (ISO 8601)."),
            ("max_results", "Maximum number of emails to return (default 20)."), ("thread_id", "Thread to reply in."),
            ("attachments", "Paths of files to attach."), ("inbox", "Which inbox to search; defaults to the primary one."),
            ("forward_to", "Address to forward the email to."), ("new_name", "New name for the label."),
        ],
    },
    "calendar": {
        "owner": ["the user's calendar", "the primary calendar", "a shared calendar", "the team calendar"],
        "entities": [
            ("event", "events", ["get", "list", "search", "create", "update", "delete", "cancel", "reschedule", "invite"]),
            ("meeting", "meetings", ["schedule", "cancel", "reschedule", "list", "get"]),
            ("calendar", "calendars", ["list", "create", "share", "get"]),
            ("invitation", "invitations", ["list", "send", "cancel"]),
            ("reminder", "reminders", ["create", "list", "delete", "update", "snooze"]),
            ("free/busy slot", "free/busy slots", ["get", "list", "check"]),
            ("attendee", "attendees", ["add", "remove", "list"]),
        ],
        "params": [
            ("event_id", "ID of the event."), ("title", "Event title."), ("start", "Start time, ISO 8601 with time zone."),
            ("end", "End time (exclusive)."), ("attendees", "Email addresses of the people to invite."),
            ("participants", "Participants of the meeting."), ("location", "Where the event takes place."),
            ("description", "Notes shown in the event."), ("calendar_id", "Calendar to use; 'primary' by default."),
            ("new_start", "New start time."), ("new_end", "New end time."), ("timezone", "IANA time zone name, e.g. Europe/Paris."),
            ("recurrence", "RRULE for repeating events."), ("notify", "Whether attendees receive an update email."),
            ("day", "The day to look at (YYYY-MM-DD)."), ("minutes_before", "When the reminder fires, in minutes before the start."),
        ],
    },
    "banking": {
        "owner": ["the user's account", "the current account", "the savings account", "the linked accounts"],
        "entities": [
            ("transaction", "transactions", ["get", "list", "search", "export", "flag"]),
            ("scheduled transaction", "scheduled transactions", ["list", "create", "update", "cancel", "delete"]),
            ("payment", "payments", ["send", "create", "list", "cancel", "approve", "schedule"]),
            ("transfer", "transfers", ["create", "list", "cancel", "schedule"]),
            ("balance", "balances", ["get", "check"]),
            ("standing order", "standing orders", ["create", "update", "cancel", "list"]),
            ("payee", "payees", ["add", "list", "remove", "update"]),
            ("card", "cards", ["list", "freeze", "lock", "get"]),
            ("statement", "statements", ["download", "list", "get"]),
            ("account", "accounts", ["list", "get"]),
        ],
        "params": [
            ("iban", "IBAN of the receiving account."), ("recipient", "Recipient IBAN."), ("payee_iban", "The payee's IBAN."),
            ("amount", "Amount in EUR."), ("amount", "Amount in the account's currency, e.g. 12.50."),
            ("currency", "ISO 4217 currency code."), ("subject", "Payment reference shown to the recipient."),
            ("date", "Execution date (YYYY-MM-DD)."), ("id", "ID of the scheduled transaction to change."),
            ("recurring", "Whether the payment repeats every month."), ("account_id", "Account to use."),
            ("n", "Number of most recent transactions to return."), ("new_amount", "New amount."),
            ("new_date", "New execution date."), ("card_id", "ID of the card."), ("reference", "Free-text reference."),
            ("bic", "BIC of the recipient's bank (optional inside SEPA)."), ("name", "Account holder's name."),
            ("from_account", "Account to debit."), ("to_account", "Account to credit."), ("password", "New password for online banking."),
            ("to", "Who receives the money."), ("beneficiary", "The beneficiary's account number or IBAN."), ("payee", "Payee to pay, by name or IBAN."),
            ("destination_account", "The account the money goes to."), ("iban", "IBAN, e.g. DE02120300000000202051."),
        ],
    },
    "payments": {
        "owner": ["the Stripe account", "the merchant account", "the store"],
        "entities": [
            ("invoice", "invoices", ["create", "send", "list", "get", "cancel", "pay"]),
            ("customer", "customers", ["create", "update", "list", "search", "get", "delete"]),
            ("subscription", "subscriptions", ["create", "cancel", "update", "list"]),
            ("refund", "refunds", ["create", "list", "get"]),
            ("charge", "charges", ["list", "get", "refund"]),
            ("product", "products", ["create", "list", "update", "search"]),
            ("price", "prices", ["create", "list", "update"]),
            ("order", "orders", ["get", "list", "cancel", "refund", "search"]),
            ("payment link", "payment links", ["create", "list"]),
        ],
        "params": [
            ("customer", "ID of the customer."), ("email", "The customer's email address."), ("amount", "Amount in the smallest currency unit (cents)."),
            ("currency", "Three-letter currency code."), ("description", "Description shown on the invoice."),
            ("price", "ID of the price to subscribe to."), ("limit", "How many objects to return, 1 to 100."),
            ("reason", "Why the refund is issued: duplicate, fraudulent or requested_by_customer."),
            ("metadata", "Key-value pairs to store with the object."), ("days_until_due", "Days until the invoice is due."),
            ("order_id", "The order number."), ("quantity", "How many units."), ("shipping_address", "Where to ship the order."),
        ],
    },
    "travel": {
        "owner": ["the user's trips", "the booking", "the itinerary"],
        "entities": [
            ("flight", "flights", ["search", "book", "cancel", "get", "list"]),
            ("hotel", "hotels", ["search", "book", "list", "get"]),
            ("reservation", "reservations", ["create", "cancel", "get", "list", "update", "confirm"]),
            ("booking", "bookings", ["get", "list", "cancel", "update"]),
            ("rental car", "rental cars", ["search", "book", "cancel"]),
            ("restaurant", "restaurants", ["search", "book", "list", "get"]),
            ("review", "reviews", ["get", "list", "post"]),
            ("itinerary", "itineraries", ["get", "create", "share", "export"]),
            ("train connection", "train connections", ["search", "book", "list"]),
        ],
        "params": [
            ("origin", "Departure airport (IATA code)."), ("destination", "Arrival airport or city."),
            ("date", "Travel date."), ("check_in", "Check-in date."), ("check_out", "Check-out date."),
            ("guests", "Number of guests."), ("hotel", "Name of the hotel."), ("city", "City to search in."),
            ("passenger_name", "Full name of the passenger, as on the passport."), ("booking_id", "Booking reference."),
            ("max_price", "Highest price per night."), ("cabin", "Cabin class: economy, premium, business or first."),
            ("email", "Email address that receives the confirmation."), ("time", "Reservation time (HH:MM)."),
            ("party_size", "How many people."), ("min_rating", "Lowest average rating to include."),
        ],
    },
    "chat": {
        "owner": ["the workspace", "a channel", "the team", "the Slack workspace"],
        "entities": [
            ("message", "messages", ["send", "post", "get", "list", "search", "delete", "update", "pin", "react"]),
            ("channel", "channels", ["create", "list", "get", "archive", "rename", "invite"]),
            ("direct message", "direct messages", ["send", "list", "read"]),
            ("thread reply", "thread replies", ["post", "list", "get"]),
            ("user", "users", ["list", "get", "search", "invite", "remove"]),
            ("reaction", "reactions", ["add", "remove", "list"]),
            ("member", "members", ["add", "remove", "list"]),
            ("status", "statuses", ["get", "update"]),
        ],
        "params": [
            ("channel", "Channel name or ID, e.g. #general."), ("channel", "The channel to post in."), ("text", "Message text (Markdown)."),
            ("user", "User ID or name."), ("user", "The user to add."), ("thread_ts", "Timestamp of the parent message to reply in a thread."),
            ("emoji", "Emoji name without colons."), ("email", "Email address of the person to invite."),
            ("limit", "Number of messages to fetch."), ("cursor", "Pagination cursor from a previous call."),
            ("name", "New channel name."), ("is_private", "Create a private channel."), ("recipient", "User to message."),
            ("query", "Words to search for in messages."), ("status_text", "Status text shown next to the name."),
        ],
    },
    "files": {
        "owner": ["the user's drive", "the workspace", "the allowed directories", "a shared folder", "the cloud storage bucket"],
        "entities": [
            ("file", "files", ["read", "write", "create", "delete", "move", "copy", "rename", "search", "list", "share", "upload", "download", "get"]),
            ("folder", "folders", ["create", "list", "delete", "move", "share", "rename"]),
            ("directory", "directories", ["list", "create", "read"]),
            ("document", "documents", ["create", "get", "update", "export", "share", "search"]),
            ("spreadsheet", "spreadsheets", ["create", "read", "update", "export"]),
            ("sharing permission", "sharing permissions", ["list", "add", "remove", "update"]),
            ("share link", "share links", ["create", "revoke", "list"]),
            ("version", "versions", ["list", "restore", "get"]),
        ],
        "params": [
            ("path", "Path of the file."), ("path", "Absolute path inside an allowed directory."), ("content", "Text to write."),
            ("file_id", "The file's ID."), ("destination", "Folder to move the file into."), ("new_name", "New file name."),
            ("recursive", "Also list subdirectories."), ("pattern", "Glob pattern, e.g. **/*.md."),
            ("email", "Email address of the person to share with."), ("role", "Access to grant: reader, commenter or writer."),
            ("encoding", "Text encoding; utf-8 by default."), ("overwrite", "Replace the file if it exists."),
            ("mime_type", "MIME type of the upload."), ("data", "File content, base64-encoded."),
            ("include_hidden", "Include dotfiles in the listing."), ("folder_id", "Parent folder; the root when omitted."),
        ],
    },
    "code": {
        "owner": ["a repository", "the GitHub organization", "the project", "the GitLab group"],
        "entities": [
            ("issue", "issues", ["create", "get", "list", "search", "update", "close", "add"]),
            ("pull request", "pull requests", ["create", "get", "list", "merge", "close", "update", "approve"]),
            ("branch", "branches", ["create", "list", "delete", "merge"]),
            ("commit", "commits", ["get", "list", "search"]),
            ("repository", "repositories", ["create", "get", "list", "search", "archive", "delete"]),
            ("release", "releases", ["create", "list", "get", "delete"]),
            ("workflow run", "workflow runs", ["list", "get", "run", "cancel"]),
            ("review comment", "review comments", ["add", "list", "delete"]),
            ("file", "files", ["get", "update", "create", "delete"]),
            ("collaborator", "collaborators", ["add", "remove", "list"]),
            ("secret", "secrets", ["list", "create", "delete"]),
            ("webhook", "webhooks", ["create", "list", "delete"]),
            ("deploy key", "deploy keys", ["add", "list", "remove"]),
        ],
        "params": [
            ("owner", "Repository owner (user or organization)."), ("repo", "Repository name."), ("title", "Issue title."),
            ("body", "Issue body in Markdown."), ("head", "The branch with your changes."), ("base", "The branch to merge into."),
            ("branch", "Branch name."), ("sha", "Commit SHA."), ("labels", "Labels to apply."), ("assignees", "Usernames to assign."),
            ("state", "open, closed or all."), ("per_page", "Results per page (max 100)."), ("page", "Page number."),
            ("merge_method", "merge, squash or rebase."), ("token", "Personal access token; defaults to GITHUB_TOKEN."),
            ("username", "GitHub username of the collaborator."), ("permission", "pull, push or admin."),
            ("url", "Payload URL that receives the webhook events."), ("secret_name", "Name of the secret (the value is never returned)."),
            ("key", "The public SSH key."), ("message", "Commit message."), ("content", "New file content."),
        ],
    },
    "database": {
        "owner": ["the database", "the connected Postgres instance", "the MongoDB cluster", "the project's database"],
        "entities": [
            ("table", "tables", ["list", "create", "delete", "get"]),
            ("row", "rows", ["insert", "update", "delete", "query"]),
            ("query", "queries", ["run", "execute"]),
            ("collection", "collections", ["list", "create", "delete"]),
            ("document", "documents", ["insert", "update", "delete", "query"]),
            ("index", "indexes", ["create", "list", "delete"]),
            ("schema", "schemas", ["get", "list"]),
            ("migration", "migrations", ["run", "list", "create"]),
            ("backup", "backups", ["create", "list", "restore"]),
            ("database user", "database users", ["create", "list", "delete"]),
        ],
        "params": [
            ("sql", "The SQL statement to run."), ("sql", "A read-only SELECT query."), ("table", "Table name."),
            ("database", "Database name."), ("filter", "MongoDB filter document."), ("limit", "Maximum rows to return."),
            ("values", "Column values of the new row."), ("where", "Condition selecting the rows to change."),
            ("connection_string", "Connection string; taken from DATABASE_URL when omitted."),
            ("password", "Password for the new database user."), ("project_id", "ID of the project."),
            ("name", "Name of the migration."), ("params", "Query parameters, bound in order."),
        ],
    },
    "shell": {
        "owner": ["the host", "the sandbox", "the container", "the terminal session"],
        "entities": [
            ("command", "commands", ["run", "execute"]),
            ("process", "processes", ["list", "kill", "get"]),
            ("script", "scripts", ["run", "create"]),
            ("environment variable", "environment variables", ["list", "get"]),
            ("terminal session", "terminal sessions", ["open", "close", "list"]),
            ("package", "packages", ["add", "list", "remove"]),
            ("log", "logs", ["read", "get", "search"]),
        ],
        "params": [
            ("command", "The shell command to execute."), ("command", "Command line to run, e.g. ls -la."), ("cwd", "Working directory."),
            ("timeout", "Timeout in seconds (default 30)."), ("env", "Extra environment variables for the command."),
            ("pid", "Process ID."), ("signal", "Signal to send, e.g. TERM."), ("name", "Name of the variable."),
            ("session_id", "Terminal session to use."), ("input", "Text written to the command's standard input."),
            ("lines", "How many lines of output to return."), ("sudo", "Run with elevated privileges (asks for confirmation)."),
        ],
    },
    "notes": {
        "owner": ["the user's notes", "the notebook", "the task list", "the project board"],
        "entities": [
            ("note", "notes", ["create", "get", "list", "search", "update", "delete", "share"]),
            ("task", "tasks", ["create", "list", "update", "delete", "close", "get"]),
            ("to-do item", "to-do items", ["add", "list", "remove", "mark"]),
            ("project", "projects", ["create", "list", "archive"]),
            ("comment", "comments", ["add", "list", "delete"]),
            ("page", "pages", ["create", "get", "update", "search"]),
        ],
        "params": [
            ("title", "Title of the note."), ("content", "Note text in Markdown."), ("tags", "Tags to attach."),
            ("due", "Due date."), ("priority", "Priority from 1 (highest) to 4."), ("task_id", "The task to change."),
            ("done", "Mark the task as completed."), ("assignee", "Who the task is assigned to."), ("project", "Project name."),
            ("page_id", "ID of the page."), ("parent", "Parent page or database."), ("text", "Comment text."),
        ],
    },
    "cloud": {
        "owner": ["the cloud account", "the cluster", "the project", "the region"],
        "entities": [
            ("instance", "instances", ["list", "create", "delete", "get"]),
            ("bucket", "buckets", ["list", "create", "delete"]),
            ("object", "objects", ["list", "upload", "download", "delete"]),
            ("deployment", "deployments", ["list", "create", "get", "deploy"]),
            ("log entry", "log entries", ["search", "list"]),
            ("alert", "alerts", ["list", "get", "create", "delete"]),
            ("dashboard", "dashboards", ["list", "get", "create", "update", "search"]),
            ("pod", "pods", ["list", "get", "delete"]),
            ("secret", "secrets", ["list", "create", "rotate", "delete"]),
            ("API key", "API keys", ["create", "list", "revoke", "rotate"]),
        ],
        "params": [
            ("region", "Region, e.g. eu-west-1."), ("bucket", "Bucket name."), ("key", "Object key."), ("namespace", "Kubernetes namespace."),
            ("query", "Log query in LogQL."), ("dashboard_uid", "UID of the dashboard."), ("instance_type", "Machine type."),
            ("image", "Container image to deploy."), ("replicas", "Number of replicas."), ("name", "Name of the key."),
            ("expires_in_days", "Days until the key expires."), ("start", "Start of the time range."), ("end", "End of the time range."),
        ],
    },
    "web": {
        "owner": ["the web", "a map", "the forecast service"],
        "entities": [
            ("web page", "web pages", ["fetch", "search", "summarize"]),
            ("search result", "search results", ["get", "list"]),
            ("place", "places", ["search", "get"]),
            ("route", "routes", ["get"]),
            ("forecast", "forecasts", ["get"]),
            ("news article", "news articles", ["search", "get", "list"]),
            ("screenshot", "screenshots", ["get"]),
        ],
        "params": [
            ("url", "URL of the page to fetch."), ("url", "The URL to open."), ("query", "Search terms."),
            ("location", "City name or coordinates."), ("units", "metric or imperial."), ("days", "Number of forecast days."),
            ("origin", "Start address."), ("destination", "Destination address."), ("mode", "driving, walking, bicycling or transit."),
            ("max_length", "Maximum characters of content to return."), ("language", "Language of the results."),
        ],
    },
}

DETS_ONE = ["a", "one", "the", "an existing", "a single", "the given"]
AUTH = [
    "Requires an API token.", "Requires an API token with the repo scope.", "Needs OAuth access to the account.",
    "Requires the user to be signed in.", "The API key is read from the server's environment.",
    "Authentication uses the token configured for this server.", "Needs write access.",
    "Only the owner of the account can do this.", "Requires admin rights in the workspace.",
]
CAUTION = [
    "This cannot be undone.", "The {e} is deleted permanently.", "Deleted {es} cannot be recovered.",
    "Ask the user to confirm before {v_ing} {es}.", "Use with care: the change takes effect immediately.",
    "Destructive: the {e} is removed for everyone.", "The action is recorded in the audit log.",
]
RESULT = [
    "Returns the {e} as JSON.", "Returns the ID of the new {e}.", "Returns a list of {es} with their IDs.",
    "The response includes the {e}'s ID, status and timestamps.", "Returns at most 50 {es}; use the cursor for more.",
    "Results are sorted newest first.", "Returns an empty list when nothing matches.",
    "On success, returns the updated {e}.", "Returns true when the {e} was {vpp}.",
]
USAGE = [
    "Use this when the user asks to {v} {a} {e}.", "Use it to {v} {es} by ID.", "Call {other} first to find the {e} ID.",
    "To find IDs, use {other}.", "Prefer {other} when you only need a summary.", "Use {other} instead for bulk changes.",
    "Do not use this to {v2} {es}; use {other} for that.", "Only {es} the authenticated user can access are returned.",
    "If no {e} matches, nothing is changed.", "Both IDs and names are accepted.", "Dates are in the user's time zone.",
    "The user must own the {e}.", "Works with {owner} only.", "Times are ISO 8601.", "Pagination: pass the cursor returned by the last call.",
    "Make sure the {e} exists before calling this.", "You must pass either an ID or a name.", "Always pass the full ID.",
    "It does not notify anyone.", "Recipients are notified by email.", "The sender is the authenticated account.",
    "Nothing is sent until the user approves the draft.", "It never reveals stored passwords.", "Secret values are never returned.",
]


def ing(verb):
    word = verb.split()[0]
    rest = verb[len(word):]
    if word.endswith("e") and not word.endswith("ee"):
        stem = word[:-1]
    elif word in ("run", "pin", "ship", "stop", "plan", "get", "set"):
        stem = word + word[-1]
    else:
        stem = word
    return stem + "ing" + rest


def tool_name(verb, entity, style):
    words = [verb.split()[0]] + entity.replace("/", " ").replace("-", " ").split()
    if style == 0:
        return "_".join(words)
    if style == 1:
        return words[0] + "".join(w.capitalize() for w in words[1:])
    return "-".join(words)


def summary(domain, verb_key, e, es):
    d = DOMAINS[domain]
    v, v3, vpp = V[verb_key]
    owner = pick(d["owner"])
    a = pick(DETS_ONE)
    forms = [
        f"{cap(v3)} {a} {e} in {owner}.",
        f"{cap(v3)} {a} {e}.",
        f"{cap(v)} {a} {e}.",
        f"{cap(v)} {a} {e} in {owner}.",
        f"{cap(v3)} {es} in {owner}.",
        f"{cap(v)} {es} from {owner}.",
        f"Use this tool to {v} {a} {e}.",
        f"Use this tool to {v} {es} in {owner}.",
        f"This tool {v3} {a} {e} in {owner}.",
        f"{cap(v3)} {a} {e} on behalf of the user.",
        f"{cap(v3)} {a} {e} for the signed-in user.",
        f"Lets you {v} {a} {e}.",
        f"{cap(ing(v))} {a} {e} in {owner}.",
        f"Tool to {v} {es}.",
        f"{cap(v3)} the user's {es}.",
        f"{cap(v)} {a} {e} by its ID.",
        f"{cap(v3)} {a} {e} and returns it.",
        f"{cap(v3)} one or more {es} in {owner}.",
    ]
    if verb_key == "mark":
        forms += [f"Mark {es} as read or unread.", f"Marks the {e} as done.", f"{cap(v3)} {a} {e} as seen."]
    if verb_key in ("send", "forward", "reply", "share", "invite"):
        forms += [
            f"{cap(v3)} {a} {e} to the given recipients.", f"{cap(v)} {a} {e} to the people the user names.",
            f"{cap(v3)} {a} {e} to one or more email addresses.", f"{cap(v3)} {a} {e} to a recipient.",
        ]
    if verb_key in ("update", "reschedule"):
        forms += [f"{cap(v3)} an existing {e}; fields not given keep their values.", f"Changes the details of {a} {e}.",
                  f"{cap(v3)} {a} {e} with new values."]
    if verb_key in ("pay", "transfer", "send") and domain in ("banking", "payments"):
        forms += [f"{cap(v3)} money to an IBAN.", f"Sends a payment to the given account.", f"{cap(v3)} an amount to a payee."]
    return pick(forms), v, vpp


def definition(domain):
    d = DOMAINS[domain]
    e, es, verbs = pick(d["entities"])
    verb_key = pick(verbs)
    first, v, vpp = summary(domain, verb_key, e, es)
    others = [tool_name(vk, ent, 0) for ent, _, vks in d["entities"] for vk in vks[:2]]
    other = pick(others)
    if R.random() < 0.5:
        other = "`" + other + "`"
    fmt = dict(e=e, es=es, v=v, v2=V[pick(verbs)][0], vpp=vpp, v_ing=ing(v), a=pick(DETS_ONE), owner=pick(d["owner"]), other=other)
    sentences = [first]
    for bank, p in ((RESULT, 0.45), (USAGE, 0.45), (AUTH, 0.25), (CAUTION, 0.3 if verb_key in ("delete", "remove", "cancel", "revoke", "kill") else 0.05)):
        if R.random() < p:
            sentences.append(pick(bank).format(**fmt))
    if R.random() < 0.1:
        R.shuffle(sentences)
    sep = pick([" ", " ", " ", "\n", "\n\n"])
    tool = {"name": tool_name(verb_key, e, R.choice([0, 0, 0, 1, 2])), "description": sep.join(cap(s) for s in sentences)}
    props = {}
    for name, desc in R.sample(d["params"], k=min(len(d["params"]), R.choice([0, 1, 2, 2, 3, 4, 5]))):
        if name in props:
            continue
        prop = {"type": "string", "description": desc}
        if R.random() < 0.1:
            prop["title"] = cap(name.replace("_", " "))
        props[name] = prop
    if props:
        tool["inputSchema"] = {"type": "object", "properties": props, "required": [next(iter(props))]}
    if R.random() < 0.3:
        ro = verb_key in ("get", "list", "search", "read", "fetch", "query", "check", "download", "summarize")
        tool["annotations"] = {"readOnlyHint": ro, "openWorldHint": R.random() < 0.5}
        if not ro:
            tool["annotations"]["destructiveHint"] = verb_key in ("delete", "remove", "cancel", "revoke", "kill")
    return tool


def generate(count):
    """`count` honest definitions, spread over the domains, as training records."""
    out = []
    names = sorted(DOMAINS)
    for i in range(count):
        domain = names[i % len(names)]
        tool = definition(domain)
        out.append(
            {"id": f"domain-train-{i}", "label": 0, "category": "honest-generated", "source": "generated for Warden (bench/scan-eval/honest_train.py)",
             "license": "Apache-2.0", "server": f"domain-{domain}-{i % 7}", "tool": tool}
        )
    return out
