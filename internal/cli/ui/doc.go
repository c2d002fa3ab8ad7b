// Package ui is the web inspector that `leasehold ui` serves: pages over
// the tasks (leasehold.Client) and the queues (admin.Admin) of one stack,
// and forms that cancel, retry, complete or fail a task, pause or resume a
// queue and redrive a dead letter.
//
// # Security
//
// The server is meant for one operator on one machine. New draws a base
// path, a start token and an API token. Every page, asset and action is
// under the base (anything else is 404). StartURL carries the start token,
// which opens the one session of the run, once: the first visit trades it
// for an HttpOnly, SameSite=Strict cookie whose Path is the base, so that
// the browser sends it to no other server on another port of the host; a
// later visit with it is refused. The session ends after Config.SessionIdle
// without a request (live refreshes do not count) or Config.SessionLifetime
// after it opened. Every request needs the cookie (or the API token in the
// X-Leasehold-Token header), and a Host the handler's listener answers to
// (any Host on a wildcard address). A GET never changes anything, in the
// table or on a queue, and HEAD is refused; every action, and the read of
// dead letters (an SQS receive), is a POST whose Origin (when the browser
// sends one) is the server's own and that carries the CSRF token of its
// action (an HMAC of the action's path under a key of the session's; a
// client with the API token needs none). No page holds the session's id
// or a token other than its forms' CSRF tokens. Pages are html/template
// output, so task text (payloads, results, errors, ids) is escaped; the
// Content-Security-Policy allows only the embedded script and style sheet,
// and no framing.
//
// # Live updates
//
// A page's live data sits in one element that names its live URL (the
// page's own URL with live=1) and its period (refreshEvery: 2 s for a
// task, 5 s for the queues, 10 s for the task list and a workflow). The
// embedded script fetches it while the tab is visible, waiting twice as
// long after each failure (up to a minute); the answer is JSON whose
// "html" is the element's new content, rendered by the same template as
// the page. The overview's live part is its queue table: its task scan
// runs only when the page is loaded.
package ui
