"""Outputs a person or an engine reads: the plan report (``report``), engine exports (``export``) and
atomic file writes shared by every command that writes a file (``atomic``)."""
