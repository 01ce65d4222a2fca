;;; conversation.el --- a whole conversation through the agentls package -*- lexical-binding: t -*-

;; Driven by tests/editor_emacs.rs, in batch Emacs 28 + eglot 1.9 and Emacs 30: the init code
;; of editors/emacs/README.md (INIT_FILE, extracted by the Rust side) loads the package; then,
;; in notes.txt, `agentls-chat' starts agentls and opens a chat, a message typed under
;; "## You" goes with `agentls-send' and the demo agent's reply streams into the chat buffer,
;; and a turn that waits is stopped with `agentls-cancel';
;; the region over notes.txt goes to agentls as the selection, `agentls-prompt' asks for the
;; TODO lines uppercased, and of the two changes proposed the first is accepted and the second
;; rejected through `eglot-code-actions', with no y/n question; notes.txt is saved and Emacs
;; quits with `save-buffers-kill-emacs' and no question. The chat, killed and opened again
;; with nothing remembered, attaches to the same agentls (the chat folder's `.workspace'), and
;; `agentls-chats' finds it again by its first message.
;; `agentls-set-mode' picks a mode from the minibuffer; the mode line shows the agent's state
;; and the pending changes. ONE JSON line on stdout (printed as Emacs quits); the Rust side
;; makes the assertions and checks agentls's discovery files are gone after the quit.
;;
;;   emacs --batch -q --no-site-file -l conversation.el INIT_FILE NOTES ARTIFACT_DIR

(load (expand-file-name "harness.el" (file-name-directory load-file-name)) nil t)

(defvar test-args (prog1 command-line-args-left (setq command-line-args-left nil)))
(defvar test-init (nth 0 test-args))
(defvar test-notes (nth 1 test-args))
(defvar test-artifacts (nth 2 test-args))
(unless test-artifacts (error "usage: conversation.el INIT_FILE NOTES ARTIFACT_DIR"))

(test-watchdog 75)

(defvar test-server nil)
(defvar test-ok nil)
(defvar test-lighters nil "Every mode line lighter seen, in order, without repeats.")
(defvar test-shown-messages nil)

(defun test-lighter ()
  "The lighter the mode line shows (`format-mode-line' is always empty in batch Emacs)."
  (substring-no-properties (or (agentls--lighter) "")))

(defun test-see-lighter ()
  "Note the lighter of the current buffer's mode line when it changed."
  (let ((lighter (test-lighter)))
    (unless (equal lighter (car test-lighters))
      (push lighter test-lighters))
    nil))

(defun test-wait-in (what buffer predicate &optional seconds)
  "`test-wait-for' PREDICATE in BUFFER, noting the lighter meanwhile."
  (test-wait-for what (lambda ()
                        (with-current-buffer buffer
                          (test-see-lighter)
                          (funcall predicate)))
                 seconds))

(defun test-agentls-diagnostics ()
  (cl-loop for d in (flymake-diagnostics)
           when (string-prefix-p "agentls" (flymake-diagnostic-text d))
           collect d))

(defun test-agentls-servers ()
  "Every live agentls eglot knows, in every project."
  (let (all)
    (maphash (lambda (_project servers)
               (dolist (s servers) (when (agentls--server-p s) (cl-pushnew s all))))
             eglot--servers-by-project)
    all))

(defun test-state ()
  "What agentls believes (agentls.debug.state)."
  (jsonrpc-request test-server :workspace/executeCommand
                   '(:command "agentls.debug.state" :arguments [])))

;; Printed as Emacs quits: after `save-buffers-kill-emacs' asked (or did not ask) its questions.
(add-hook 'kill-emacs-hook
          (lambda ()
            (test-put 'quit_questions (vconcat (reverse test-supersession-questions)))
            (test-put 'confirmations (vconcat (reverse test-confirmations)))
            (test-put 'ok (if test-ok t :json-false))
            (test-save-logs test-server test-artifacts)
            (test-print-result)))

(condition-case err
    (progn
      (package-activate-all)            ; Emacs 28: Debian's elpa-eglot
      (load test-init nil t)            ; the README's init code
      (with-eval-after-load 'eglot
        (cl-defmethod eglot-handle-notification :before
          (_server (_method (eql window/showMessage)) &key message &allow-other-keys)
          (push message test-shown-messages)))
      (test-put 'emacs_version emacs-version)
      (test-put 'eglot_version (test-eglot-version))
      (test-put 'key_chat (symbol-name (key-binding (kbd "C-c a c"))))
      (test-put 'key_prompt (symbol-name (key-binding (kbd "C-c a p"))))
      (test-put 'lighter_in_mode_line
                (if (member '(agentls-mode-line agentls--mode-line-entry) mode-line-misc-info)
                    t :json-false))
      (transient-mark-mode 1)           ; batch Emacs starts without it

      ;; notes.txt, then a chat from there: agentls starts for the project.
      (find-file test-notes)
      (defvar test-notes-buffer (current-buffer))
      (test-put 'notes_mode (symbol-name major-mode))
      (let ((chat (call-interactively #'agentls-chat)))
        (unless (bufferp chat) (error "agentls-chat returned %S" chat))
        (set-buffer chat)
        (switch-to-buffer chat))
      (setq test-server (agentls--find-server))
      (test-put 'server_pid (process-id (jsonrpc--process test-server)))
      (test-put 'server_command (vconcat (process-command (jsonrpc--process test-server))))
      (test-put 'chat_file buffer-file-name)
      (test-put 'chat_mode (symbol-name major-mode))
      (test-wait-for "eglot to manage the chat" #'eglot-managed-p)
      (test-put 'chat_same_server (if (eq (eglot-current-server) test-server) t :json-false))
      (with-current-buffer test-notes-buffer
        (test-wait-for "eglot to manage notes.txt" #'eglot-managed-p)
        (test-put 'notes_same_server (if (eq (eglot-current-server) test-server) t :json-false)))
      (test-put 'agentls_servers (length (test-agentls-servers)))
      ;; agentls's discovery files for terminal agents, while it runs.
      (test-put 'discovery_files
                (test-wait-for
                 "agentls's two discovery files"
                 (lambda ()
                   (let ((files (cl-loop for dir in (list (expand-file-name "~/.claude/ide")
                                                          (expand-file-name "gemini/ide"
                                                                            (getenv "TMPDIR")))
                                         append (and (file-directory-p dir)
                                                     (directory-files dir t "\\`[^.]")))))
                     (and (= (length files) 2) (vconcat files))))))
      (test-put 'server_folders (plist-get (test-state) :folders))

      ;; A message under "## You", sent; the reply streams into this buffer.
      (goto-char (point-max))
      (insert "read notes.txt")
      (call-interactively #'agentls-send)
      (test-wait-in "the reply's end in the chat" (current-buffer)
                    (lambda () (string-match-p "_demo: end_turn" (test-buffer-text)))
                    30)
      (test-put 'chat_after_reply (test-buffer-text))
      ;; agentls knows the version its edits made of the chat, with no pause of the user's
      ;; (eglot would send the change only once Emacs is idle).
      (test-put 'chat_versions
                (vector eglot--versioned-identifier
                        (cl-loop for doc across (plist-get (test-state) :documents)
                                 when (equal (plist-get doc :path) buffer-file-name)
                                 return (plist-get doc :version))))

      ;; A turn that waits until cancelled, stopped with `agentls-cancel'.
      (goto-char (point-max))
      (insert "@hang")
      (call-interactively #'agentls-send)
      (test-wait-in "the agent to hang" (current-buffer)
                    (lambda () (string-match-p "Waiting until you cancel" (test-buffer-text)))
                    20)
      (call-interactively #'agentls-cancel)
      (test-wait-in "the turn to end cancelled" (current-buffer)
                    (lambda () (string-match-p "_demo: cancelled" (test-buffer-text)))
                    20)
      (test-put 'cancelled t)

      ;; The mode picker: the demo agent's modes, in the minibuffer.
      (let (offered)
        (cl-letf (((symbol-function 'completing-read)
                   (lambda (_prompt collection &rest _)
                     (setq offered (mapcar #'car collection))
                     (car (cl-remove-if-not (lambda (c) (string-prefix-p "Ask" c)) offered)))))
          (call-interactively #'agentls-set-mode))
        (test-put 'modes_offered (vconcat offered)))

      ;; notes.txt: the whole buffer selected, with the keys a user types.
      (switch-to-buffer test-notes-buffer)
      (execute-kbd-macro (kbd "M-< C-SPC M->"))
      (test-put 'region_active (if (region-active-p) t :json-false))
      (let ((whole (test-buffer-text)))
        (test-put 'selection
                  (test-wait-for "the selection to reach agentls"
                                 (lambda ()
                                   (let ((s (plist-get (test-state) :latestSelection)))
                                     (and (equal (plist-get s :text) whole) s)))
                                 5)))

      ;; Ask about the region from the minibuffer.
      (cl-letf (((symbol-function 'read-string)
                 (lambda (prompt &rest _)
                   (test-put 'prompt_asked prompt)
                   "uppercase")))
        (call-interactively #'agentls-prompt))
      (deactivate-mark)
      (let ((diags (test-wait-in "the two changes in flymake" test-notes-buffer
                                 (lambda ()
                                   (let ((d (test-agentls-diagnostics)))
                                     (or (and (= (length d) 2) d) (progn (flymake-start) nil))))
                                 30)))
        (test-put 'diagnostic_lines
                  (vconcat (mapcar (lambda (d) (line-number-at-pos (flymake-diagnostic-beg d)))
                                   diags))))
      (test-wait-in "the lighter to count the changes" test-notes-buffer
                    (lambda () (string-match-p "2 to review" (test-lighter)))
                    5)
      (let ((beg (test-goto "// TODO first")))
        (test-put 'accepted (test-pick-action "Accept change 1/2" beg (1+ beg))))
      ;; Accepted, it waits for the other decision (the agent writes once both are made).
      (test-wait-in "the lighter to count one change" test-notes-buffer
                    (lambda () (string-match-p "1 to review" (test-lighter))))
      (let ((beg (test-goto "// TODO second")))
        (test-put 'rejected (test-pick-action "Reject change 2/2" beg (1+ beg))))
      (test-wait-in "the end of the turn" test-notes-buffer
                    (lambda () (cl-some (lambda (m) (string-match-p "demo: end_turn .*notes.txt" m))
                                        test-shown-messages))
                    30)
      (test-wait-in "the diagnostics to go" test-notes-buffer
                    (lambda () (null (test-agentls-diagnostics))))
      (test-wait-for "the accepted change in the buffer"
                     (lambda () (let ((case-fold-search nil))
                                  (string-match-p "TODO FIRST" (test-buffer-text)))))
      (test-put 'notes_buffer (test-buffer-text))
      (test-put 'notes_disk_before_save (test-disk test-notes))
      (save-buffer)
      (test-put 'notes_disk (test-disk test-notes))
      (test-put 'notes_modified (if (buffer-modified-p) t :json-false))
      (test-wait-in "the mode line to say the agent is ready" test-notes-buffer
                    (lambda () (string-match-p "demo:ready\\]" (test-lighter)))
                    10)
      (test-put 'menus (vconcat (mapcar #'vconcat (reverse test-menus))))

      ;; The chat, forgotten and opened again: its folder names the workspace.
      (let ((chat (cdr (assq 'chat_file test-output))))
        (with-current-buffer (find-buffer-visiting chat)
          (save-buffer)
          (kill-buffer))
        (clrhash agentls--chat-projects)
        (with-current-buffer (find-file chat)
          (test-wait-for "eglot to manage the chat again" #'eglot-managed-p)
          (test-put 'reopened_same_server
                    (if (eq (eglot-current-server) test-server) t :json-false))
          ;; Whole again (the prompt's turn may have reached agentls after the save, and its
          ;; text comes then) and under a new "## You": a second message, with the key. The
          ;; saved file may end under a "## You" already, from the turn before.
          (test-wait-in "the reopened chat to end under a new heading" (current-buffer)
                        (lambda () (let ((text (string-trim-right (test-buffer-text))))
                                     (and (string-match-p "_demo: end_turn .*files: notes.txt" text)
                                          (string-suffix-p "## You" text))))
                        20)
          (goto-char (point-max))
          (insert "read notes.txt again")
          (execute-kbd-macro (kbd "C-c C-c"))
          ;; Its reply, after it (the turn's end line under the message).
          (test-wait-in "the reply from the reopened chat" (current-buffer)
                        (lambda () (string-match-p "read notes.txt again\n\\(.\\|\n\\)*\n_demo: end_turn"
                                                   (test-buffer-text)))
                        30)
          ;; Unsaved: quitting saves it without asking.
          (test-put 'chat_modified_before_quit (if (buffer-modified-p) t :json-false))))
      ;; Found again by its first message: `agentls-chats' from notes.txt, alone in the frame.
      (let ((chat (cdr (assq 'chat_file test-output)))
            offered)
        (switch-to-buffer test-notes-buffer)
        (delete-other-windows)
        (cl-letf (((symbol-function 'completing-read)
                   (lambda (_prompt collection &rest _)
                     (setq offered (mapcar #'car collection))
                     (car offered))))
          (call-interactively #'agentls-chats))
        (test-put 'chats_offered (vconcat offered))
        (test-put 'chat_picked (if (equal (buffer-file-name (window-buffer (selected-window))) chat)
                                   t
                                 :json-false)))
      (test-put 'agentls_servers_at_end (length (test-agentls-servers)))
      (test-put 'lighters (vconcat (reverse test-lighters)))
      (test-put 'shown_messages (vconcat (reverse test-shown-messages)))
      (setq test-ok t))
  (error
   (test-log "script error: %S" err)
   (test-put 'error (format "%S" err))
   (when test-server
     (test-put 'server_reviews (format "%S" (agentls--reviews test-server)))
     (test-put (quote server_status) (format "%S" (agentls--status test-server)))
     (test-put 'lighters (vconcat (reverse test-lighters))))))

;; Quit as a user does (C-x C-c): buffers are saved or asked about, then Emacs exits and
;; agentls gets its SIGHUP.
(if test-ok
    (save-buffers-kill-emacs)
  (kill-emacs 1))

;;; conversation.el ends here
