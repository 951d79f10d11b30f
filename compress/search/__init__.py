"""`compress search`: the fastest (or smallest) model that keeps a share of the teacher's accuracy, found by
measurement across every family and chain.

:mod:`.space` reads the space the methods declare (and the user narrows) as pipelines; :mod:`.probe` sizes a
candidate from its shape and times its structure and its training steps before anything trains; :mod:`.walk` trains
candidates in order of their objective, each stopped once it cannot reach the bar, and runs the finals;
:mod:`.search` checks the question and drives it all; :mod:`.ledger` is its record (search.json) and :mod:`.report`
its report (search.md, search.html, search.png).
"""
