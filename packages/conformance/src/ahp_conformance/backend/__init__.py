"""The backend judge (``ahp-conformance backend``), one concept a module.

How a run goes (:mod:`ahp_conformance.backend_judge` is the command line that drives it):
a link (:mod:`.links`) reaches the backend over persistent stdio, ``per_event`` or HTTP
through raw, bounded I/O (:mod:`.peer`); the messages sent are built in :mod:`.probes`;
a :class:`~.run.Run` (:mod:`.run`) carries the link, what the run has learnt and the
send-and-check helpers; :mod:`.judge` is the shared record (checks, faults, incidents,
the give-up rule); :mod:`.answers` judges one intercept answer with the wire's rules.

The check groups, in the order a run sends them (each a module of functions of a Run):

- :mod:`.discovery`: ``hooks/capabilities``, ``hooks/configuration``;
- :mod:`.decisions`: tool.before under narrowed and wider grants, unknown fields,
  extension keys, duplicate delivery;
- :mod:`.jsonrpc`: framing and JSON-RPC errors, versions, unsupported events, invalid
  params, notifications, an oversize frame;
- :mod:`.http_rules`: HTTP media types, GET, bearer tokens (HTTP only);
- :mod:`.fixture_cases`: the official fixtures' requests and notifications;
- :mod:`.per_event`: the reduced set ``--per-event`` runs instead of the above;
- :mod:`.summary`: the run-wide checks, judged last on what the links recorded.
"""
