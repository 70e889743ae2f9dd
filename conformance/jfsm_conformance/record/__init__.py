"""What a run keeps of what happened, below every part that acts or judges.

- `exercise`: how often each rule, step, reply and outcome was exercised;
- `traces`: a transcript of the protocol messages, failure traces on disk, and their replay.

The client, the session's steps and the machines record into these; the runner reads them.
Nothing here imports another part of the suite (decision R222).
"""
