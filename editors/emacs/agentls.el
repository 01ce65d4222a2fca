;;; agentls.el --- attach agentls with eglot -*- lexical-binding: t -*-

;; Minimal setup: load this file (or copy the form below into your init file).
;; Eglot runs one server per buffer, so list the modes where agentls should be that server.

(with-eval-after-load 'eglot
  (add-to-list 'eglot-server-programs
               '((text-mode markdown-mode org-mode) . ("agentls"))))

(provide 'agentls)
;;; agentls.el ends here
