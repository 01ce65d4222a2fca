;;; review_and_edits.el --- agentls in a real Emacs + eglot -*- lexical-binding: t -*-

;; Driven by tests/editor_emacs.rs: a real Emacs (28 + eglot 1.9) loads the shipped
;; editors/emacs/agentls.el, starts agentls (found on PATH, as a user's config finds it) for a
;; file with non-ASCII text, edits it, then reviews a proposal: diagnostics in flymake, code
;; actions at a change, "Accept change 1/2" picked from eglot's menu and its edit applied
;; with no y/n question (the package answers eglot's for agentls's own edits), "Reject change
;; 2/2" likewise. It prints ONE JSON line on stdout with what the
;; buffer and the server hold; the Rust side makes the assertions. The exit code is 0 only
;; when every step could be done.
;;
;;   emacs --batch -q --no-site-file -l review_and_edits.el \
;;     AGENTLS_EL SAMPLE PROPOSAL_FILE ARTIFACT_DIR
;;
;; Batch Emacs has no command loop: waits run the event loop with `accept-process-output'
;; until a condition holds or a deadline passes, and "the user pauses" runs the idle timers
;; that are due (eglot sends didChange from one).

(load (expand-file-name "harness.el" (file-name-directory load-file-name)) nil t)

(defvar test-args (prog1 command-line-args-left (setq command-line-args-left nil)))
(defvar test-agentls-el (nth 0 test-args))
(defvar test-sample (nth 1 test-args))
(defvar test-proposal-file (nth 2 test-args))
(defvar test-artifacts (nth 3 test-args))
(unless test-artifacts
  (error "usage: review_and_edits.el AGENTLS_EL SAMPLE PROPOSAL_FILE ARTIFACT_DIR"))

(test-watchdog 45)

;; What the server said, as a user would see it in the echo area or eglot's events buffer.
(defvar test-log-messages nil)
(defvar test-shown-messages nil)

(with-eval-after-load 'eglot
  (cl-defmethod eglot-handle-notification :before
    (_server (_method (eql window/logMessage)) &key message &allow-other-keys)
    (push message test-log-messages))
  (cl-defmethod eglot-handle-notification :before
    (_server (_method (eql window/showMessage)) &key message &allow-other-keys)
    (push message test-shown-messages)))

(defun test-verdict ()
  "The verdict of the review opened with agentls.debug.review, once logged."
  (cl-loop for m in test-log-messages
           when (string-match "agentls\\.debug\\.review verdict: \\(.*\\)" m)
           return (json-read-from-string (match-string 1 m))))

(defun test-state (server)
  "What agentls believes (agentls.debug.state), after the pending changes went out."
  (test-idle)
  (eglot-execute-command server 'agentls.debug.state []))

(defun test-server-doc (state)
  "The sample document in the server's STATE, as a plist (:path :text :languageId ...)."
  (cl-loop for doc across (plist-get state :documents)
           when (equal (plist-get doc :path) (expand-file-name test-sample))
           return doc))

(defun test-server-text (state)
  (plist-get (test-server-doc state) :text))

(defun test-agentls-diagnostics ()
  (cl-loop for d in (flymake-diagnostics)
           when (string-prefix-p "agentls" (flymake-diagnostic-text d))
           collect d))

(defvar test-server nil)
(defvar test-ok nil)

(condition-case err
    (progn
      (package-activate-all)            ; Debian's elpa-eglot lives in the system package dir
      (require 'eglot)
      (test-put 'eglot_version (test-eglot-version))
      (test-put 'emacs_version emacs-version)
      (load test-agentls-el nil t)
      (test-put 'agentls_on_path (executable-find "agentls"))

      ;; Open the file and start eglot the way a user does (M-x eglot).
      (find-file test-sample)
      (test-put 'major_mode (symbol-name major-mode))
      (call-interactively #'eglot)
      (setq test-server (test-wait-for "eglot to connect"
                                       (lambda () (and (eglot-managed-p) (eglot-current-server)))
                                       20))
      (test-put 'server_command (vconcat (process-command (jsonrpc--process test-server))))
      (test-put 'position_encoding
                (plist-get (eglot--capabilities test-server) :positionEncoding))
      (test-log "connected: %s" (jsonrpc-name test-server))

      ;; Edits: each kind of change eglot tracks, around emoji and CJK text.
      (test-goto "😀" t) (insert "🎉")                        ; insert after an astral char
      (test-goto "漢字") (delete-char 2) (insert "汉字漢")     ; replace CJK
      (goto-char (point-min)) (delete-indentation 1)          ; join lines 1 and 2
      (test-idle)                                             ; a pause: didChange goes out
      (test-goto "かな" t) (insert "\n")                      ; split a line
      (goto-char (point-max)) (backward-char) (insert " ✓ 末尾")
      (goto-char (point-max)) (insert "새 줄 🦀\n")
      (let ((beg (test-goto "here")))                         ; replace across a line break
        (delete-region beg (test-goto "汉" t))
        (goto-char beg) (insert "here + "))
      (test-goto "字") (delete-char 1) (insert "子")
      (goto-char (point-min)) (capitalize-word 1)             ; casing: eglot's github#259 path
      (test-put 'buffer (test-buffer-text))
      (let ((state (test-state test-server)))
        (test-put 'server_after_edits (test-server-text state))
        (test-put 'server_language_id (plist-get (test-server-doc state) :languageId))
        (test-put 'server_encoding (plist-get state :encoding))
        (test-put 'server_folders (plist-get state :folders)))

      ;; A review: the agent proposes a new text for the file.
      (let* ((proposal (with-temp-buffer
                         (insert-file-contents test-proposal-file)
                         (buffer-string)))
             (uri (eglot--path-to-uri (expand-file-name test-sample))))
        (eglot-execute-command test-server 'agentls.debug.review
                               (vector (list :uri uri :text proposal :origin "gemini"))))
      (let ((diags (test-wait-for "agentls diagnostics in flymake"
                                  (lambda ()
                                    (let ((d (test-agentls-diagnostics)))
                                      (and (= (length d) 2) d))))))
        (test-put 'diagnostics
                  (vconcat (mapcar (lambda (d)
                                     `((text . ,(flymake-diagnostic-text d))
                                       (type . ,(symbol-name (flymake-diagnostic-type d)))
                                       (line . ,(line-number-at-pos (flymake-diagnostic-beg d)))))
                                   diags))))

      ;; The code actions at the first change (the crab on line 1).
      (let* ((beg (test-goto "🦀"))
             (end (1+ beg)))
        (test-put 'actions_at_change
                  (vconcat (mapcar (lambda (a) (plist-get a :title))
                                   (eglot-code-actions beg end))))
        (let ((before (test-buffer-text)))
          (test-put 'accepted_action (test-pick-action "Accept change 1/2" beg end))
          ;; The command has answered; the edit comes as a request eglot must still see.
          (test-wait-for "the accepted change to reach the buffer"
                         (lambda () (not (equal before (test-buffer-text)))))))
      (test-put 'buffer_after_accept (test-buffer-text))
      (test-put 'confirmations (vconcat (reverse test-confirmations)))

      ;; The other change: rejected from its own menu.
      (let* ((beg (test-goto "새"))
             (end (1+ beg)))
        (test-put 'rejected_action (test-pick-action "Reject change 2/2" beg end)))
      (test-put 'verdict (test-wait-for "the review's verdict" #'test-verdict))
      (test-wait-for "the diagnostics to go" (lambda () (null (test-agentls-diagnostics))))
      (test-put 'buffer_final (test-buffer-text))
      (test-put 'server_final (test-server-text (test-state test-server)))
      (test-put 'menus (vconcat (mapcar #'vconcat (reverse test-menus))))
      (test-put 'shown_messages (vconcat (reverse test-shown-messages)))

      ;; The built-in demo agent's change to another file, accepted, then saved as a user
      ;; does: Emacs must not find the file changed since it was visited.
      (let ((notes (expand-file-name "notes.txt" (file-name-directory test-sample)))
            (disk (lambda (file) (with-temp-buffer (insert-file-contents file) (buffer-string)))))
        (with-temp-file notes (insert "keep\n// TODO a\n"))
        (find-file notes)
        (test-wait-for "eglot to manage notes.txt" #'eglot-managed-p)
        (eglot-execute-command test-server 'agentls.prompt
                               (vector (list :text "uppercase notes.txt"
                                             :uri (eglot--path-to-uri notes))))
        (test-wait-for "the demo agent's review"
                       (lambda () (or (test-agentls-diagnostics) (progn (flymake-start) nil)))
                       20)
        ;; An unsaved line of the user's, typed while the review is open.
        (goto-char (point-min)) (insert "mine\n") (test-idle)
        (let ((beg (test-goto "// TODO a")))
          (test-put 'agent_accepted_action (test-pick-action "Accept all changes" beg (1+ beg))))
        (test-wait-for "the end of the demo agent's turn"
                       (lambda () (cl-some (lambda (m) (string-match-p "demo: end_turn" m))
                                           test-shown-messages))
                       20)
        (test-put 'agent_buffer (test-buffer-text))
        (test-put 'agent_disk_before_save (funcall disk notes))
        (test-put 'agent_file_as_visited
                  (if (verify-visited-file-modtime (current-buffer)) t :json-false))
        (save-buffer)
        (test-put 'agent_disk (funcall disk notes))
        (test-put 'agent_modified_after_save (if (buffer-modified-p) t :json-false)))
      (test-put 'supersession_questions (vconcat (reverse test-supersession-questions)))
      (setq test-ok t))
  (error
   (test-log "script error: %S" err)
   (test-put 'error (format "%S" err))))

;; Keep the wire log and the server's stderr for the Rust side's failure report.
(test-save-logs test-server test-artifacts)

;; Shut the server down as `eglot-shutdown' does (shutdown, then exit), but let it leave on its
;; own: `eglot-shutdown' kills the process right after `exit', which hides its exit status.
(when test-server
  (let ((process (jsonrpc--process test-server)))
    (condition-case err
        (progn
          (setf (eglot--shutdown-requested test-server) t)
          (jsonrpc-request test-server :shutdown nil :timeout 5)
          (jsonrpc-notify test-server :exit nil)
          (test-wait-for "agentls to exit" (lambda () (not (process-live-p process))) 5)
          (test-put 'server_exit (process-exit-status process)))
      (error (test-put 'shutdown_error (format "%S" err))))
    (ignore-errors (jsonrpc-shutdown test-server))))

(test-print-result)
(kill-emacs (if test-ok 0 1))

;;; review_and_edits.el ends here
