"""The server's commands (serve, api, worker, db, admin): the one room that wires the API,
the worker and the job domain into processes. The light CLI loads it by name when the
`server` extra is installed, so the client side never imports it."""
