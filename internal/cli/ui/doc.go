// Package ui is the web inspector that `leasehold ui` serves: pages over
// the tasks (leasehold.Client) and the queues (admin.Admin) of one stack,
// and forms that cancel, retry, complete or fail a task, pause or resume a
// queue and redrive a dead letter.
//
// # Security
//
// The server is meant for one operator on one machine. New draws a random
// session token; the URL printed at start carries it, and the first visit
// trades it for an HttpOnly, SameSite=Strict cookie. Every request needs
// that cookie (or the token in the X-Leasehold-Token header). A GET never
// changes anything; every action is a POST that carries the token again in
// a form field or the header, whose Origin (when the browser sends one) is
// the server's own, and whose Host is one the server listens on. Pages are
// html/template output, so task text (payloads, results, errors, ids) is
// escaped; the Content-Security-Policy allows only the embedded script and
// style sheet, and no framing.
//
// # Live updates
//
// A page's data sits in one element that names its live URL (the page's
// own URL with live=1). The embedded script fetches it every 2 s while
// the tab is visible; the answer is JSON whose "html" is the element's
// new content, rendered by the same template as the page.
package ui
