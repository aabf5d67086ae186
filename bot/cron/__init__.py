"""The cron wing: scheduled jobs (schedules, rows, runs), heartbeats, and the scheduler clock."""
