"""The wire format: pydantic models of every request and response, one module per
resource (`jobs`, `artifacts`, `logs`, `streams`, `datasets`, `queue`, `studies`, `models`,
`webhooks`, `usage`, `errors`; `common` holds what they share), shared by the API and the
typed client. The vocabulary lives here once: `JobStatus` with its terminal set, the
priority levels, `StudyStatus` with its ended set; the ORM stores these and the dashboard
receives them as data. Needs only pydantic and the standard library (an import contract
says so)."""
