/* SPDX-License-Identifier: MIT */
/*
 * Logging for infeedd, in the OpenBSD shape: log_warn adds strerror(errno),
 * log_warnx does not, fatal and fatalx exit.  Every line goes to stderr in
 * one format: "TIME infeedd[PID]: LEVEL: message".  Under journald
 * (JOURNAL_STREAM set) the line is "<N>LEVEL: message": the "<N>" priority
 * lets journald keep the level, and it adds time, identity and pid itself.
 */

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "log.h"

static int	 log_verbose;
static int	 log_journal;
static char	 log_ident[32] = "infeedd";

/* Map libevent's own messages into our log. */
static void
log_event_cb(int severity, const char *msg)
{
	if (severity >= EVENT_LOG_WARN)
		log_warnx("libevent: %s", msg);
	else
		log_debug("libevent: %s", msg);
}

/*
 * Set the identity and verbosity (1 adds debug lines, -1 keeps only fatal
 * ones, for fuzz targets); call once at start-up and after fork.
 */
void
log_init(const char *ident, int verbose)
{
	snprintf(log_ident, sizeof(log_ident), "%s", ident);
	log_verbose = verbose;
	log_journal = getenv("JOURNAL_STREAM") != NULL;
	event_set_log_callback(log_event_cb);
}

/*
 * Escape what could forge or hide a line: control characters (newline,
 * escape, ...) and C1 controls written as UTF-8 come out as "\xNN".  This
 * is the one place every string reaches the log through, whoever sent it
 * (a client's names, a file's paths).
 */
static void
log_escape(char *out, size_t len, const char *in)
{
	const unsigned char	*p = (const unsigned char *)in;
	size_t			 o = 0;

	for (; *p != '\0' && o + 5 < len; p++) {
		if (*p < 0x20 || *p == 0x7f) {
			snprintf(out + o, len - o, "\\x%02x", *p);
			o += 4;
		} else if (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) {
			snprintf(out + o, len - o, "\\x%02x", p[1]);
			o += 4;
			p++;
		} else
			out[o++] = (char)*p;
	}
	out[o] = '\0';
}

/* Write one line with its level, keeping errno intact. */
static void
log_vwrite(int prio, const char *level, const char *fmt, va_list ap,
    const char *suffix)
{
	char		 raw[1024], msg[4096], stamp[32];
	struct tm	 tm;
	time_t		 now;
	int		 saved = errno;

	vsnprintf(raw, sizeof(raw), fmt, ap);
	log_escape(msg, sizeof(msg), raw);
	if (log_journal)	/* journald adds the identity and pid */
		fprintf(stderr, "<%d>%s: %s%s%s\n", prio, level, msg,
		    suffix ? ": " : "", suffix ? suffix : "");
	else {
		now = time(NULL);
		gmtime_r(&now, &tm);
		strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", &tm);
		fprintf(stderr, "%s %s[%d]: %s: %s%s%s\n", stamp, log_ident,
		    (int)getpid(), level, msg, suffix ? ": " : "",
		    suffix ? suffix : "");
	}
	errno = saved;
}

/* Warning with the current errno's text. */
void
log_warn(const char *fmt, ...)
{
	va_list	ap;
	char	err[128];

	if (log_verbose < 0)
		return;
	snprintf(err, sizeof(err), "%s", strerror(errno));
	va_start(ap, fmt);
	log_vwrite(4, "warning", fmt, ap, err);
	va_end(ap);
}

/* Warning without errno. */
void
log_warnx(const char *fmt, ...)
{
	va_list	ap;

	if (log_verbose < 0)
		return;
	va_start(ap, fmt);
	log_vwrite(4, "warning", fmt, ap, NULL);
	va_end(ap);
}

/* Informational line. */
void
log_info(const char *fmt, ...)
{
	va_list	ap;

	if (log_verbose < 0)
		return;
	va_start(ap, fmt);
	log_vwrite(6, "info", fmt, ap, NULL);
	va_end(ap);
}

/* Debug line, printed only with --verbose. */
void
log_debug(const char *fmt, ...)
{
	va_list	ap;

	if (log_verbose < 1)
		return;
	va_start(ap, fmt);
	log_vwrite(7, "debug", fmt, ap, NULL);
	va_end(ap);
}

/* Log with errno and exit. */
void
fatal(const char *fmt, ...)
{
	va_list	ap;
	char	err[128];

	snprintf(err, sizeof(err), "%s", strerror(errno));
	va_start(ap, fmt);
	log_vwrite(2, "fatal", fmt, ap, err);
	va_end(ap);
	exit(EXIT_FAILURE);
}

/* Log and exit. */
void
fatalx(const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	log_vwrite(2, "fatal", fmt, ap, NULL);
	va_end(ap);
	exit(EXIT_FAILURE);
}
