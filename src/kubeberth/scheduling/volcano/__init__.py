"""The Volcano scheduler: sessions, actions and plugins as Volcano runs them (see docs/volcano.md).

It lives in ``scheduling`` because its predicates and nodeorder plugins reuse kube-scheduler's
filter and score plugins, as Volcano's own plugins do (docs/design.md).
"""
