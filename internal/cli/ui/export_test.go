package ui

// CSRFToken is the CSRF token of the form whose action is the path action
// (relative to the base) in s's session; empty before it opens.
func CSRFToken(s *Server, action string) string {
	s.auth.mu.Lock()
	defer s.auth.mu.Unlock()
	if s.auth.cur == nil {
		return ""
	}
	return s.auth.cur.csrfToken(action)
}
