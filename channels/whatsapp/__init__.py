"""WhatsApp through the official WhatsApp Business Cloud API (Graph API calls, signed webhooks)."""
