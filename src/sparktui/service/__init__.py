"""The composition root the console talks to: it owns every task that does
I/O (poller, journal and lane followers, endpoint checks) and reports what it
learns as plain events. It never imports Textual."""
