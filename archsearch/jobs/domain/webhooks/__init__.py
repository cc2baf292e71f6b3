"""Webhooks: a team's subscriptions, and the outbox their deliveries are sent from."""
