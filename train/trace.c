/* SPDX-License-Identifier: MIT */
/*
 * The execution timeline of trace.h and its two renderings.
 *
 * Spans are kept in a fixed-cap array that grows by doubling up to the cap;
 * a full timeline drops further spans and counts them, so the memory and
 * the files written are bounded by the cap.  Every string written (labels
 * included) goes through an escaper that keeps printable ASCII only, so
 * the JSON and the SVG stay valid whatever a caller put in a label.
 */

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"
#include "fail.h"

/* SVG geometry, in pixels. */
#define SVG_WIDTH	1200
#define SVG_LEFT	80
#define SVG_RIGHT	30
#define SVG_TOP		66
#define SVG_LANE	26
#define SVG_GAP		6
#define SVG_CHAR	6.5	/* width of a label character at font-size 11 */

static const char *const trace_kind_names[TRACE_NKINDS] = {
	[TRACE_FORWARD] = "forward",
	[TRACE_BACKWARD] = "backward",
	[TRACE_RECOMPUTE] = "recompute",
	[TRACE_COPY] = "inter-IPU copy",
	[TRACE_HOST_IN] = "host in",
	[TRACE_HOST_OUT] = "host out",
	[TRACE_ALLREDUCE] = "all-reduce",
	[TRACE_WEIGHT_UPDATE] = "weight update",
	[TRACE_HOST_WAIT] = "host wait",
};

/* PopVision-like colours: fill, then the text colour that reads on it. */
static const char *const trace_fill[TRACE_NKINDS] = {
	[TRACE_FORWARD] = "#43a047",
	[TRACE_BACKWARD] = "#e53935",
	[TRACE_RECOMPUTE] = "#fb8c00",
	[TRACE_COPY] = "#1e88e5",
	[TRACE_HOST_IN] = "#ffcc80",
	[TRACE_HOST_OUT] = "#ffcc80",
	[TRACE_ALLREDUCE] = "#26c6da",
	[TRACE_WEIGHT_UPDATE] = "#8e24aa",
	[TRACE_HOST_WAIT] = "#9e9e9e",
};
static const char *const trace_ink[TRACE_NKINDS] = {
	[TRACE_FORWARD] = "#fff",
	[TRACE_BACKWARD] = "#fff",
	[TRACE_RECOMPUTE] = "#000",
	[TRACE_COPY] = "#fff",
	[TRACE_HOST_IN] = "#000",
	[TRACE_HOST_OUT] = "#000",
	[TRACE_ALLREDUCE] = "#000",
	[TRACE_WEIGHT_UPDATE] = "#fff",
	[TRACE_HOST_WAIT] = "#000",
};

static void	trace_name(const struct trace_span *, char *, size_t);
static void	trace_put_escaped(FILE *, const char *, bool);
static int	trace_close(FILE *, const char *, char *, size_t);
static int	trace_int_cmp(const void *, const void *);
static double	trace_nice_step(double);
static void	trace_svg_si(double, char *, size_t);
static int	trace_svg_row(const struct timeline *, int);
struct svg_frame;
static void	trace_svg_frame_init(const struct timeline *,
    struct svg_frame *);
static void	trace_svg_head(FILE *, const struct timeline *,
    const struct svg_frame *);
static void	trace_svg_block(FILE *, const struct timeline *,
    const struct svg_frame *, const struct trace_span *);
static int	trace_svg_marks(FILE *, const struct timeline *,
    const struct svg_frame *);
static void	trace_svg_axes(FILE *, const struct timeline *,
    const struct svg_frame *);
static void	trace_svg_legend(FILE *, const struct svg_frame *, int);

/* Allocate an empty timeline; the arrays grow on demand. */
struct timeline *
trace_new(int nipus, size_t max_spans)
{
	struct timeline	*tl;

	if (nipus < 1 || nipus > TRACE_MAX_IPUS)
		return (NULL);
	if ((tl = calloc(1, sizeof *tl)) == NULL)
		return (NULL);
	tl->nipus = nipus;
	tl->max_spans = max_spans > 0 ? max_spans : TRACE_DEFAULT_SPANS;
	tl->max_marks = tl->max_spans;
	return (tl);
}

/* Free @tl; NULL is a no-op. */
void
trace_free(struct timeline *tl)
{
	if (tl == NULL)
		return;
	free(tl->spans);
	free(tl->marks);
	free(tl);
}

/* Empty @tl for reuse. */
void
trace_clear(struct timeline *tl)
{
	tl->nspans = 0;
	tl->nmarks = 0;
	tl->dropped = 0;
}

/* Return the name of @kind. */
const char *
trace_kind_name(enum trace_kind kind)
{
	if ((int)kind < 0 || kind >= TRACE_NKINDS)
		return ("unknown");
	return (trace_kind_names[kind]);
}

/* Copy a checked span in, growing up to the cap. */
int
trace_append(struct timeline *tl, const struct trace_span *span)
{
	struct trace_span	*grown;
	size_t			 cap;

	if (span->lane != TRACE_LANE_HOST &&
	    (span->lane < 0 || span->lane >= tl->nipus))
		return (-1);
	if ((int)span->kind < 0 || span->kind >= TRACE_NKINDS ||
	    span->replica < 0 || !isfinite(span->start) ||
	    !isfinite(span->end) || span->end < span->start)
		return (-1);
	if (tl->nspans == tl->cap) {
		if (tl->cap >= tl->max_spans) {
			tl->dropped++;
			return (-1);
		}
		cap = tl->cap > 0 ? tl->cap * 2 : 256;
		if (cap > tl->max_spans)
			cap = tl->max_spans;
		grown = realloc(tl->spans, cap * sizeof *grown);
		if (grown == NULL) {
			tl->dropped++;
			return (-1);
		}
		tl->spans = grown;
		tl->cap = cap;
	}
	tl->spans[tl->nspans] = *span;
	tl->spans[tl->nspans].label[TRACE_LABEL_MAX - 1] = '\0';
	tl->nspans++;
	return (0);
}

/* Append a replica-0 span from its fields. */
int
trace_add(struct timeline *tl, int lane, enum trace_kind kind, int micro,
    int iteration, double start, double end, const char *label)
{
	struct trace_span	sp;

	memset(&sp, 0, sizeof sp);
	sp.lane = lane;
	sp.kind = kind;
	sp.micro = micro;
	sp.iteration = iteration;
	sp.start = start;
	sp.end = end;
	if (label != NULL)
		snprintf(sp.label, sizeof sp.label, "%s", label);
	return (trace_append(tl, &sp));
}

/* Record a step boundary, growing up to the cap. */
int
trace_mark(struct timeline *tl, double t)
{
	double	*grown;
	size_t	 cap;

	if (!isfinite(t) || tl->nmarks >= tl->max_marks)
		return (-1);
	if (tl->nmarks == tl->cap_marks) {
		cap = tl->cap_marks > 0 ? tl->cap_marks * 2 : 64;
		if (cap > tl->max_marks)
			cap = tl->max_marks;
		grown = realloc(tl->marks, cap * sizeof *grown);
		if (grown == NULL)
			return (-1);
		tl->marks = grown;
		tl->cap_marks = cap;
	}
	tl->marks[tl->nmarks++] = t;
	return (0);
}

/* Return the latest span end. */
double
trace_end(const struct timeline *tl)
{
	double	end = 0;
	size_t	i;

	for (i = 0; i < tl->nspans; i++)
		if (tl->spans[i].end > end)
			end = tl->spans[i].end;
	return (end);
}

/* The display name of a span: its label, or the kind and micro-batch. */
static void
trace_name(const struct trace_span *sp, char *buf, size_t len)
{
	static const char	*const letter[TRACE_NKINDS] = {
		[TRACE_FORWARD] = "F", [TRACE_BACKWARD] = "B",
		[TRACE_RECOMPUTE] = "R", [TRACE_HOST_IN] = "in ",
		[TRACE_HOST_OUT] = "out ",
	};

	if (sp->label[0] != '\0')
		snprintf(buf, len, "%s", sp->label);
	else if (letter[sp->kind] != NULL && sp->micro >= 0)
		snprintf(buf, len, "%s%d", letter[sp->kind], sp->micro);
	else
		snprintf(buf, len, "%s", trace_kind_name(sp->kind));
}

/* Write @s with JSON (@xml false) or XML escaping, printable ASCII only. */
static void
trace_put_escaped(FILE *f, const char *s, bool xml)
{
	unsigned char	c;

	for (; *s != '\0'; s++) {
		c = (unsigned char)*s;
		if (c < 0x20 || c >= 0x7f)
			fputc('?', f);
		else if (xml && c == '&')
			fputs("&amp;", f);
		else if (xml && c == '<')
			fputs("&lt;", f);
		else if (xml && c == '>')
			fputs("&gt;", f);
		else if (xml && c == '"')
			fputs("&quot;", f);
		else if (xml && c == '\'')
			fputs("&apos;", f);
		else if (!xml && (c == '"' || c == '\\')) {
			fputc('\\', f);
			fputc(c, f);
		} else
			fputc(c, f);
	}
}

/* Close @f, turning any write error into a message and removing @path. */
static int
trace_close(FILE *f, const char *path, char *err, size_t errlen)
{
	int	bad, saved;

	bad = ferror(f);
	saved = errno;
	if (fclose(f) != 0 && !bad) {
		bad = 1;
		saved = errno;
	}
	if (!bad)
		return (0);
	remove(path);
	return (train_fail(err, errlen, "cannot write %s: %s", path,
	    strerror(saved != 0 ? saved : EIO)));
}

/* Order ints ascending. */
static int
trace_int_cmp(const void *a, const void *b)
{
	int	x = *(const int *)a, y = *(const int *)b;

	return ((x > y) - (x < y));
}

/* Write @tl as Chrome/Perfetto trace-event JSON. */
int
trace_write_json(const struct timeline *tl, const char *path, char *err,
    size_t errlen)
{
	const struct trace_span	*sp;
	FILE			*f;
	char			 name[64];
	int			*reps, nreps = 0, r, k;
	size_t			 i;

	reps = malloc((tl->nspans + 1) * sizeof *reps);
	if (reps == NULL)
		return (train_fail(err, errlen, "out of memory writing %s",
		    path));
	/* Replica 0 is always named, so that an empty trace still opens. */
	reps[nreps++] = 0;
	for (i = 0; i < tl->nspans; i++)
		reps[nreps++] = tl->spans[i].replica;
	qsort(reps, nreps, sizeof *reps, trace_int_cmp);

	if ((f = fopen(path, "w")) == NULL) {
		free(reps);
		return (train_fail(err, errlen, "cannot create %s: %s", path,
		    strerror(errno)));
	}
	fputs("{\"displayTimeUnit\":\"ms\",\"otherData\":{\"generator\":"
	    "\"infeed-train\",\"time_unit\":\"us\"", f);
	fprintf(f, ",\"dropped_spans\":%zu},\n\"traceEvents\":[\n",
	    tl->dropped);
	for (r = 0; r < nreps; r++) {
		if (r > 0 && reps[r] == reps[r - 1])
			continue;
		fprintf(f, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,"
		    "\"tid\":0,\"args\":{\"name\":\"replica %d\"}},\n",
		    reps[r], reps[r]);
		for (k = 0; k <= tl->nipus; k++) {
			fprintf(f, "{\"name\":\"thread_name\",\"ph\":\"M\","
			    "\"pid\":%d,\"tid\":%d,\"args\":{\"name\":",
			    reps[r], k);
			if (k < tl->nipus)
				fprintf(f, "\"IPU %d\"}},\n", k);
			else
				fputs("\"host\"}},\n", f);
			fprintf(f, "{\"name\":\"thread_sort_index\","
			    "\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":"
			    "{\"sort_index\":%d}}%s\n", reps[r], k, k,
			    tl->nspans > 0 || r + 1 < nreps ? "," : "");
		}
	}
	free(reps);
	for (i = 0; i < tl->nspans; i++) {
		sp = &tl->spans[i];
		trace_name(sp, name, sizeof name);
		fputs("{\"name\":\"", f);
		trace_put_escaped(f, name, false);
		fprintf(f, "\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,"
		    "\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,\"args\":{"
		    "\"micro_batch\":%d,\"device_iteration\":%d}}%s\n",
		    trace_kind_name(sp->kind), sp->replica,
		    sp->lane == TRACE_LANE_HOST ? tl->nipus : sp->lane,
		    sp->start * 1e6, (sp->end - sp->start) * 1e6, sp->micro,
		    sp->iteration, i + 1 < tl->nspans ? "," : "");
	}
	fputs("]}\n", f);
	return (trace_close(f, path, err, errlen));
}

/* A round tick step (1, 2 or 5 x 10^n) giving about ten ticks over @range. */
static double
trace_nice_step(double range)
{
	double	raw = range / 10, mag, frac;

	if (!(raw > 0))
		return (1);
	mag = pow(10, floor(log10(raw)));
	frac = raw / mag;
	if (frac <= 1)
		return (mag);
	if (frac <= 2)
		return (2 * mag);
	if (frac <= 5)
		return (5 * mag);
	return (10 * mag);
}

/* Format a cycle count with an SI suffix: 950, 12k, 1.5M, 2G. */
static void
trace_svg_si(double v, char *buf, size_t len)
{
	if (v >= 1e9)
		snprintf(buf, len, "%gG", v / 1e9);
	else if (v >= 1e6)
		snprintf(buf, len, "%gM", v / 1e6);
	else if (v >= 1e3)
		snprintf(buf, len, "%gk", v / 1e3);
	else
		snprintf(buf, len, "%g", v);
}

/* The SVG row of a lane: IPUs top to bottom, the host last. */
static int
trace_svg_row(const struct timeline *tl, int lane)
{
	return (lane == TRACE_LANE_HOST ? tl->nipus : lane);
}

/* Where the SVG of a timeline puts things. */
struct svg_frame {
	double	t0, t1;		/* the time drawn, s */
	double	scale;		/* px per s */
	double	plotw;		/* px of the lanes */
	int	rows;		/* lanes: the IPUs and the host */
	int	axis_y, legend_y, height;
};

/* Lay out @tl's SVG: from its earliest start (0 at the latest) to its
 * end. */
static void
trace_svg_frame_init(const struct timeline *tl, struct svg_frame *fr)
{
	size_t i;

	fr->plotw = SVG_WIDTH - SVG_LEFT - SVG_RIGHT;
	fr->rows = tl->nipus + 1;
	fr->t0 = 0;
	fr->t1 = trace_end(tl);
	for (i = 0; i < tl->nspans; i++)
		if (tl->spans[i].start < fr->t0)
			fr->t0 = tl->spans[i].start;
	if (fr->t1 <= fr->t0)
		fr->t1 = fr->t0 + 1e-6;
	fr->scale = fr->plotw / (fr->t1 - fr->t0);
	fr->axis_y = SVG_TOP + fr->rows * (SVG_LANE + SVG_GAP);
	fr->legend_y = fr->axis_y + 44;
	fr->height = fr->legend_y + 30;
}

/* The SVG's header, background, title, and a band and a name per lane. */
static void
trace_svg_head(FILE *f, const struct timeline *tl,
    const struct svg_frame *fr)
{
	double	y;
	size_t	i, other = 0;
	int	k;

	fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
	    "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
	    "height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" "
	    "font-size=\"11\">\n", SVG_WIDTH, fr->height, SVG_WIDTH,
	    fr->height);
	fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"#fff\"/>\n",
	    SVG_WIDTH, fr->height);
	fprintf(f, "<text x=\"%d\" y=\"16\" font-size=\"13\" "
	    "font-weight=\"bold\">Execution trace, replica 0: %.3f us",
	    SVG_LEFT, (fr->t1 - fr->t0) * 1e6);
	for (i = 0; i < tl->nspans; i++)
		if (tl->spans[i].replica != 0)
			other++;
	if (other > 0)
		fprintf(f, " (%zu spans of other replicas not drawn)", other);
	if (tl->dropped > 0)
		fprintf(f, " (%zu spans beyond the cap dropped)", tl->dropped);
	fputs("</text>\n", f);
	for (k = 0; k < fr->rows; k++) {
		y = SVG_TOP + k * (SVG_LANE + SVG_GAP);
		fprintf(f, "<rect x=\"%d\" y=\"%.1f\" width=\"%.1f\" "
		    "height=\"%d\" fill=\"#f4f4f4\"/>\n", SVG_LEFT, y,
		    fr->plotw, SVG_LANE);
		fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">",
		    SVG_LEFT - 8, y + SVG_LANE / 2.0 + 4);
		if (k < tl->nipus)
			fprintf(f, "IPU %d</text>\n", k);
		else
			fputs("host</text>\n", f);
	}
}

/* One span's block, with its micro-batch as a label when there is room. */
static void
trace_svg_block(FILE *f, const struct timeline *tl,
    const struct svg_frame *fr, const struct trace_span *sp)
{
	char	name[64];
	double	x, w, y;

	x = SVG_LEFT + (sp->start - fr->t0) * fr->scale;
	w = (sp->end - sp->start) * fr->scale;
	if (w < 0.4)
		w = 0.4;
	y = SVG_TOP + trace_svg_row(tl, sp->lane) * (SVG_LANE + SVG_GAP);
	trace_name(sp, name, sizeof name);
	fprintf(f, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" "
	    "height=\"%d\" fill=\"%s\"><title>", x, y, w, SVG_LANE,
	    trace_fill[sp->kind]);
	trace_put_escaped(f, name, true);
	fprintf(f, " (%s", trace_kind_name(sp->kind));
	if (sp->iteration >= 0)
		fprintf(f, ", device iteration %d", sp->iteration);
	fprintf(f, "): %.3f-%.3f us</title></rect>\n",
	    sp->start * 1e6, sp->end * 1e6);
	if (sp->micro < 0 && sp->label[0] == '\0')
		return;
	if (w < SVG_CHAR * strlen(name) + 4) {
		if (sp->micro < 0)
			return;
		snprintf(name, sizeof name, "%d", sp->micro);
		if (w < SVG_CHAR * strlen(name) + 4)
			return;
	}
	fprintf(f, "<text x=\"%.2f\" y=\"%.1f\" fill=\"%s\" "
	    "stroke=\"none\" text-anchor=\"middle\">", x + w / 2,
	    y + SVG_LANE / 2.0 + 4, trace_ink[sp->kind]);
	trace_put_escaped(f, name, true);
	fputs("</text>\n", f);
}

/* Step boundaries, thinned to at least 3 px apart; how many are drawn. */
static int
trace_svg_marks(FILE *f, const struct timeline *tl,
    const struct svg_frame *fr)
{
	double	x, lastx = -1e9;
	size_t	i;
	int	shown = 0;

	fprintf(f, "<g stroke=\"#555\" stroke-width=\"0.6\" "
	    "stroke-dasharray=\"2,2\">\n");
	for (i = 0; i < tl->nmarks; i++) {
		x = SVG_LEFT + (tl->marks[i] - fr->t0) * fr->scale;
		if (x < SVG_LEFT - 0.5 || x > SVG_LEFT + fr->plotw + 0.5 ||
		    x - lastx < 3)
			continue;
		fprintf(f, "<line x1=\"%.2f\" y1=\"%d\" x2=\"%.2f\" "
		    "y2=\"%d\"/>\n", x, SVG_TOP - 2, x,
		    fr->axis_y - SVG_GAP + 2);
		lastx = x;
		shown++;
	}
	fputs("</g>\n", f);
	return (shown);
}

/* The time axis in µs below the lanes, and the cycles scale above. */
static void
trace_svg_axes(FILE *f, const struct timeline *tl,
    const struct svg_frame *fr)
{
	char	num[32];
	double	t0 = fr->t0, t1 = fr->t1, step, v, x;

	fprintf(f, "<g stroke=\"#000\">\n<line x1=\"%d\" y1=\"%d\" "
	    "x2=\"%.1f\" y2=\"%d\"/>\n", SVG_LEFT, fr->axis_y,
	    SVG_LEFT + fr->plotw, fr->axis_y);
	step = trace_nice_step((t1 - t0) * 1e6);
	for (v = ceil(t0 * 1e6 / step) * step; v <= t1 * 1e6 + step * 1e-9;
	    v += step) {
		x = SVG_LEFT + (v * 1e-6 - t0) * fr->scale;
		fprintf(f, "<line x1=\"%.2f\" y1=\"%d\" x2=\"%.2f\" y2=\"%d\"/>"
		    "\n<text x=\"%.2f\" y=\"%d\" stroke=\"none\" "
		    "text-anchor=\"middle\">%g</text>\n", x, fr->axis_y, x,
		    fr->axis_y + 4, x, fr->axis_y + 16, v);
	}
	fprintf(f, "<text x=\"%d\" y=\"%d\" stroke=\"none\" "
	    "text-anchor=\"end\">time (us)</text>\n", SVG_LEFT - 8,
	    fr->axis_y + 16);
	if (tl->clock_hz > 0 && isfinite(tl->clock_hz)) {
		fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%.1f\" "
		    "y2=\"%d\"/>\n", SVG_LEFT, SVG_TOP - 8,
		    SVG_LEFT + fr->plotw, SVG_TOP - 8);
		step = trace_nice_step((t1 - t0) * tl->clock_hz);
		for (v = ceil(t0 * tl->clock_hz / step) * step;
		    v <= t1 * tl->clock_hz + step * 1e-9; v += step) {
			x = SVG_LEFT + (v / tl->clock_hz - t0) * fr->scale;
			trace_svg_si(v, num, sizeof num);
			fprintf(f, "<line x1=\"%.2f\" y1=\"%d\" x2=\"%.2f\" "
			    "y2=\"%d\"/>\n<text x=\"%.2f\" y=\"%d\" "
			    "stroke=\"none\" text-anchor=\"middle\">%s"
			    "</text>\n", x, SVG_TOP - 12, x, SVG_TOP - 8, x,
			    SVG_TOP - 15, num);
		}
		fprintf(f, "<text x=\"%d\" y=\"%d\" stroke=\"none\" "
		    "text-anchor=\"end\">cycles @ %g GHz</text>\n",
		    SVG_LEFT - 8, SVG_TOP - 15, tl->clock_hz / 1e9);
	}
	fputs("</g>\n", f);
}

/* The legend: a swatch per kind, and the step boundary if drawn. */
static void
trace_svg_legend(FILE *f, const struct svg_frame *fr, int shown_marks)
{
	double	x;
	int	k, legend_y = fr->legend_y;

	for (k = 0, x = SVG_LEFT; k < TRACE_NKINDS; k++) {
		if (k == TRACE_HOST_OUT)
			continue;	/* same colour as host in */
		fprintf(f, "<rect x=\"%.1f\" y=\"%d\" width=\"12\" "
		    "height=\"12\" fill=\"%s\"/>\n<text x=\"%.1f\" y=\"%d\">%s"
		    "</text>\n", x, legend_y - 10, trace_fill[k], x + 16,
		    legend_y, k == TRACE_HOST_IN ? "host transfer" :
		    trace_kind_name(k));
		x += 16 + SVG_CHAR * strlen(k == TRACE_HOST_IN ?
		    "host transfer" : trace_kind_name(k)) + 18;
	}
	if (shown_marks > 0)
		fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" "
		    "stroke=\"#555\" stroke-dasharray=\"2,2\"/>\n<text "
		    "x=\"%.1f\" y=\"%d\">step boundary</text>\n", x + 6,
		    legend_y - 11, x + 6, legend_y + 1, x + 12, legend_y);
}

/* Write replica 0 of @tl as a PopVision-like SVG. */
int
trace_write_svg(const struct timeline *tl, const char *path, char *err,
    size_t errlen)
{
	struct svg_frame	 fr;
	FILE			*f;
	size_t			 i;
	int			 shown_marks;

	trace_svg_frame_init(tl, &fr);
	if ((f = fopen(path, "w")) == NULL)
		return (train_fail(err, errlen, "cannot create %s: %s", path,
		    strerror(errno)));
	trace_svg_head(f, tl, &fr);
	/* Blocks, replica 0 only. */
	fputs("<g stroke=\"#fff\" stroke-width=\"0.3\">\n", f);
	for (i = 0; i < tl->nspans; i++)
		if (tl->spans[i].replica == 0)
			trace_svg_block(f, tl, &fr, &tl->spans[i]);
	fputs("</g>\n", f);
	shown_marks = trace_svg_marks(f, tl, &fr);
	trace_svg_axes(f, tl, &fr);
	trace_svg_legend(f, &fr, shown_marks);
	fputs("</svg>\n", f);
	return (trace_close(f, path, err, errlen));
}
