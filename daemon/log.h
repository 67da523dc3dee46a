/* SPDX-License-Identifier: MIT */
/*
 * Logging, in the OpenBSD shape: log_warn adds strerror(errno), log_warnx
 * does not, fatal and fatalx exit.  The bottom layer: every other file of
 * the daemon may use it.
 */
#ifndef INFEED_LOG_H
#define INFEED_LOG_H

#define PRINTFLIKE(a, b) __attribute__((format(printf, a, b)))

void	log_init(const char *ident, int verbose);
void	log_warn(const char *, ...) PRINTFLIKE(1, 2);
void	log_warnx(const char *, ...) PRINTFLIKE(1, 2);
void	log_info(const char *, ...) PRINTFLIKE(1, 2);
void	log_debug(const char *, ...) PRINTFLIKE(1, 2);
void	fatal(const char *, ...) PRINTFLIKE(1, 2) __attribute__((noreturn));
void	fatalx(const char *, ...) PRINTFLIKE(1, 2) __attribute__((noreturn));

#endif /* INFEED_LOG_H */
