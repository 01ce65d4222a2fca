;;; harness.el --- what the batch Emacs test scripts share -*- lexical-binding: t -*-

;; Loaded first by each script under tests/emacs/: a result alist printed as ONE JSON line on
;; stdout (the Rust side makes the assertions), waits with deadlines that run the event loop,
;; what "the user pauses" means in batch (the due idle timers run), a watchdog, and the
;; questions Emacs asks, recorded and answered.

(require 'cl-lib)
(require 'json)

;; Files are UTF-8 whatever the locale the test runs in.
(set-language-environment "UTF-8")
(prefer-coding-system 'utf-8)

(defvar test-output nil "Alist printed as the JSON result.")
(defun test-put (key value) (setf (alist-get key test-output) value))

(defun test-print-result ()
  "Print `test-output' as one JSON line on stdout."
  (let ((coding-system-for-write 'utf-8))
    (princ (concat (json-encode test-output) "\n"))))

(defun test-exit (status)
  "End Emacs with STATUS, the servers' output no longer read: a reply still streaming into a
chat must not be answered over a connection `kill-emacs' is closing (that error would end
Emacs with another status)."
  (dolist (process (process-list))
    (set-process-filter process #'ignore)
    (set-process-sentinel process #'ignore))
  (kill-emacs status))

(defun test-log (fmt &rest args)
  (message "[emacs] %s" (apply #'format fmt args)))

(defun test-watchdog (seconds)
  "End Emacs with status 124 after SECONDS: a wait that never returns must not hang the run."
  (run-with-timer seconds nil (lambda ()
                                (message "WATCHDOG: the script took too long")
                                (test-put 'error "watchdog")
                                (test-print-result)
                                (kill-emacs 124))))

(defun test-eventually (predicate &optional seconds)
  "Run the event loop until PREDICATE returns non-nil, and return that; nil after SECONDS
(default 10)."
  (let ((deadline (+ (float-time) (or seconds 10)))
        result)
    (while (and (not (setq result (funcall predicate)))
                (< (float-time) deadline))
      (accept-process-output nil 0.02))
    result))

(defun test-wait-for (what predicate &optional seconds)
  "Run the event loop until PREDICATE returns non-nil, and return that.
Fail naming WHAT after SECONDS (default 10)."
  (or (test-eventually predicate seconds) (error "Timed out waiting for %s" what)))

(defun test-idle ()
  "What happens when the user pauses: the due idle timers run (batch Emacs never idles)."
  (dolist (timer (copy-sequence timer-idle-list))
    (when (memq timer timer-idle-list)
      (timer-event-handler timer))))

(defun test-buffer-text ()
  (save-restriction (widen) (buffer-substring-no-properties (point-min) (point-max))))

(defun test-goto (needle &optional end)
  "Move point to the start (or END) of the first NEEDLE in the buffer."
  (goto-char (point-min))
  (unless (search-forward needle nil t) (error "%S not in the buffer" needle))
  (unless end (goto-char (match-beginning 0)))
  (point))

(defun test-disk (file)
  (with-temp-buffer (insert-file-contents file) (buffer-string)))

;; Questions: y/n ones are answered `test-yes' (default yes) and recorded.
(defvar test-confirmations nil "Prompts asked with `y-or-n-p'.")
(defvar test-yes t "The answer to every `y-or-n-p'.")
(advice-add 'y-or-n-p :override
            (lambda (prompt)
              (push prompt test-confirmations)
              (test-log "answering %s to %S" (if test-yes "y" "n") prompt)
              test-yes))

(defvar test-supersession-questions nil
  "What Emacs asked because a file changed under it (\"changed since visited\"); answered no.")
(advice-add 'yes-or-no-p :override
            (lambda (prompt)
              (push prompt test-supersession-questions)
              (test-log "answering no to %S" prompt)
              nil))
(advice-add 'ask-user-about-supersession-threat :override
            (lambda (file)
              (push (format "%s changed on disk" file) test-supersession-questions)
              (signal 'file-supersession (list "File changed on disk" file))))

(defvar test-menus nil "The titles eglot offered in its code action menus.")

(defun test-pick-action (title-prefix beg end)
  "Run the code action whose title starts with TITLE-PREFIX, as a user does with
`eglot-code-actions' on the region BEG..END: the menu, then the choice."
  (let ((last-nonmenu-event ?\r)          ; a keyboard user: the minibuffer, not a popup
        (chosen nil))
    (cl-letf (((symbol-function 'completing-read)
               (lambda (_prompt collection &rest _)
                 (let ((titles (mapcar (lambda (c) (if (consp c) (car c) c)) collection)))
                   (push titles test-menus)
                   (setq chosen (cl-find-if (lambda (title) (string-prefix-p title-prefix title))
                                            titles))
                   (or chosen (error "No action %S among %S" title-prefix titles))))))
      (eglot-code-actions beg end nil t))
    chosen))

(defun test-eglot-version ()
  "eglot's version: its package's, or \"built-in\" with the Emacs version's."
  (let ((desc (cadr (assq 'eglot package-alist))))
    (if desc (package-version-join (package-desc-version desc))
      (format "built-in %s" (or (ignore-errors
                                  (package-version-join
                                   (alist-get 'eglot package--builtin-versions)))
                                "?")))))

(defun test-save-logs (server artifacts)
  "Keep SERVER's wire log and stderr in ARTIFACTS for the Rust side's failure report."
  (when server
    (let ((coding-system-for-write 'utf-8-unix))
      (ignore-errors
        (with-current-buffer (jsonrpc-events-buffer server)
          (write-region (point-min) (point-max) (expand-file-name "eglot-events.log" artifacts)
                        nil 'silent)))
      (let ((stderr (jsonrpc-stderr-buffer server)))
        (when (buffer-live-p stderr)
          (with-current-buffer stderr
            (write-region (point-min) (point-max) (expand-file-name "agentls.stderr" artifacts)
                          nil 'silent)))))))

(provide 'harness)
;;; harness.el ends here
