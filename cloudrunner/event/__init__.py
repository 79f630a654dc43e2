"""One agent event from payload to answer, as a pipeline of named stages.

`pipeline` runs the stages in order; `intake` reads the payload once; `workspaces`,
`homes`, `environments` and `sandboxes` each hold one kind of prepared thing and its cache;
`sandbox_profiles` sits below them all; `record_builders` builds every record the event
writes.
"""
