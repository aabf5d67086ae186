"""Tests of attachments in and files out, per platform."""
