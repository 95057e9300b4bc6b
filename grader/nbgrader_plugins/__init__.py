"""translab's steps in nbgrader's own pipelines, one class per file named after it, as ``nbgrader_config.py``
lists them (nbgrader lays out its ``preprocessors/`` the same way).

Autograde (``c.Autograde.*``):
    ``batch_autograde_exporter``  the exporter: plain nbgrader and the formgrader grade through the batch
    ``record_variant_shown``      sanitize step: the variant code the outputs show, before ClearOutput
    ``guarded_execute``           nbgrader's Execute with a notebook budget, a kept kernel and verdicts from outside
    ``flag_incidents``            after SaveAutoGrades: flags a notebook whose grading was cut short
    ``sanitize_student_content``  last: no live student HTML on disk (again before feedback)
Release (``c.GenerateAssignment.preprocessors``):
    ``remove_after_grading``      cells shown only after grading are not released (``grader.course.after_grading``)
Feedback (``c.GenerateFeedback.*``):
    ``feedback_gate_exporter``    the exporter: no ungraded answer released as 0 unless the instructor says so
    ``hide_hidden_test_tracebacks``, ``clear_outputs_after_hidden_tests``, ``sanitize_student_content``,
    ``show_after_grading``, ``demote_headings`` (the page's one h1 is its score)
"""
