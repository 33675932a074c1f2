"""The application databases the local tooling starts: a real server, never a stand-in."""
