"""One Signoff process: its settings, start-up checks, assembly (`app`), serving and draining, jobs, metrics and clock."""
