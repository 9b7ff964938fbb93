//! Geo commands (Redis's `geo.c` and `geohash.c`): points are members of a sorted set whose
//! score is Redis's 52-bit interleaved geohash, so a geo key *is* a zset (TYPE says zset) and
//! every zset command works on it.
//!
//! The math follows Redis exactly, because replies depend on it bit for bit: coordinates are
//! decoded to the centre of their 26-step cell, distances use Redis's haversine with its earth
//! radius, and searches visit the same nine geohash boxes in the same order (so an unsorted
//! GEOSEARCH returns members in Redis's order).

use crate::exec::{eq_ic, parse_int, CmdError, CmdResult, Ctx};
use crate::types::zset::{parse_score, store_zset, zadd_apply, AddFlags, ScoreRange, ZLimits, ZSet};

// ---------------------------------------------------------------------------------------------
// Geohash math (Redis's geohash.c / geohash_helper.c)
// ---------------------------------------------------------------------------------------------

pub const GEO_STEP_MAX: u32 = 26;
pub const GEO_LAT_MIN: f64 = -85.05112878;
pub const GEO_LAT_MAX: f64 = 85.05112878;
pub const GEO_LONG_MIN: f64 = -180.0;
pub const GEO_LONG_MAX: f64 = 180.0;
/// Redis's earth radius (meters) for every distance.
pub const EARTH_RADIUS_IN_METERS: f64 = 6372797.560856;
const MERCATOR_MAX: f64 = 20037726.37;
const D_R: f64 = std::f64::consts::PI / 180.0;

#[inline]
fn deg_rad(d: f64) -> f64 {
    d * D_R
}

#[inline]
fn rad_deg(r: f64) -> f64 {
    r / D_R
}

/// A geohash of `step` bits per coordinate: longitude bits at odd positions, latitude at even.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hash {
    pub bits: u64,
    pub step: u32,
}

impl Hash {
    const ZERO: Hash = Hash { bits: 0, step: 0 };

    fn is_zero(&self) -> bool {
        self.bits == 0 && self.step == 0
    }
}

/// Spreads the 32 bits of `x` to the even bit positions of a u64.
fn spread(x: u32) -> u64 {
    let mut x = x as u64;
    x = (x | (x << 16)) & 0x0000FFFF0000FFFF;
    x = (x | (x << 8)) & 0x00FF00FF00FF00FF;
    x = (x | (x << 4)) & 0x0F0F0F0F0F0F0F0F;
    x = (x | (x << 2)) & 0x3333333333333333;
    (x | (x << 1)) & 0x5555555555555555
}

/// Gathers the even bit positions of `x` into a u32 (the inverse of [`spread`]).
fn squash(x: u64) -> u32 {
    let mut x = x & 0x5555555555555555;
    x = (x | (x >> 1)) & 0x3333333333333333;
    x = (x | (x >> 2)) & 0x0F0F0F0F0F0F0F0F;
    x = (x | (x >> 4)) & 0x00FF00FF00FF00FF;
    x = (x | (x >> 8)) & 0x0000FFFF0000FFFF;
    ((x | (x >> 16)) & 0x00000000FFFFFFFF) as u32
}

/// Redis's `geohashEncode` over the given ranges. None outside the ranges.
pub fn encode(lon_range: (f64, f64), lat_range: (f64, f64), lon: f64, lat: f64, step: u32) -> Option<Hash> {
    if !(GEO_LONG_MIN..=GEO_LONG_MAX).contains(&lon) || !(GEO_LAT_MIN..=GEO_LAT_MAX).contains(&lat) {
        return None;
    }
    if lon < lon_range.0 || lon > lon_range.1 || lat < lat_range.0 || lat > lat_range.1 {
        return None;
    }
    let mut lat_off = (lat - lat_range.0) / (lat_range.1 - lat_range.0);
    let mut lon_off = (lon - lon_range.0) / (lon_range.1 - lon_range.0);
    lat_off *= (1u64 << step) as f64;
    lon_off *= (1u64 << step) as f64;
    Some(Hash { bits: spread(lat_off as u32) | (spread(lon_off as u32) << 1), step })
}

/// Encodes with Redis's coordinate ranges (latitude ±85.05112878: the Mercator square).
pub fn encode_wgs84(lon: f64, lat: f64, step: u32) -> Option<Hash> {
    encode((GEO_LONG_MIN, GEO_LONG_MAX), (GEO_LAT_MIN, GEO_LAT_MAX), lon, lat, step)
}

/// A decoded cell: (lon min, lon max, lat min, lat max).
#[derive(Clone, Copy, Debug)]
struct Area {
    lon: (f64, f64),
    lat: (f64, f64),
}

fn decode_area(h: Hash) -> Area {
    let lat_scale = GEO_LAT_MAX - GEO_LAT_MIN;
    let lon_scale = GEO_LONG_MAX - GEO_LONG_MIN;
    let ilat = squash(h.bits);
    let ilon = squash(h.bits >> 1);
    let div = (1u64 << h.step) as f64;
    Area {
        lat: (GEO_LAT_MIN + (ilat as f64 / div) * lat_scale, GEO_LAT_MIN + ((ilat as f64 + 1.0) / div) * lat_scale),
        lon: (GEO_LONG_MIN + (ilon as f64 / div) * lon_scale, GEO_LONG_MIN + ((ilon as f64 + 1.0) / div) * lon_scale),
    }
}

/// `(uint64_t)d` as Redis's C compiles on x86-64, for scores that are not geohashes (a member
/// added with ZADD -1 or +inf): negative values wrap through int64, and out-of-range values
/// and NaN become cvttsd2si's "integer indefinite". Rust's `as u64` saturates instead.
fn c_double_to_u64(d: f64) -> u64 {
    const TWO63: f64 = 9_223_372_036_854_775_808.0;
    let cvttsd2si = |x: f64| if x.is_nan() || !(-TWO63..TWO63).contains(&x) { i64::MIN } else { x as i64 };
    if d < TWO63 {
        cvttsd2si(d) as u64
    } else {
        (cvttsd2si(d - TWO63) as u64) ^ (1 << 63)
    }
}

/// The point a 52-bit score stands for: the centre of its cell, clamped to the valid ranges
/// (Redis's `geohashDecodeToLongLatWGS84`).
pub fn decode_score(score: f64) -> (f64, f64) {
    let a = decode_area(Hash { bits: c_double_to_u64(score), step: GEO_STEP_MAX });
    let lon = ((a.lon.0 + a.lon.1) / 2.0).clamp(GEO_LONG_MIN, GEO_LONG_MAX);
    let lat = ((a.lat.0 + a.lat.1) / 2.0).clamp(GEO_LAT_MIN, GEO_LAT_MAX);
    (lon, lat)
}

/// Redis's `geohashGetLatDistance`.
fn lat_distance(lat1: f64, lat2: f64) -> f64 {
    EARTH_RADIUS_IN_METERS * (deg_rad(lat2) - deg_rad(lat1)).abs()
}

/// Redis's `geohashGetDistance`: haversine, with its shortcut for equal longitudes.
pub fn distance(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    let v = ((deg_rad(lon2) - deg_rad(lon1)) / 2.0).sin();
    if v == 0.0 {
        return lat_distance(lat1, lat2);
    }
    let (lat1r, lat2r) = (deg_rad(lat1), deg_rad(lat2));
    let u = ((lat2r - lat1r) / 2.0).sin();
    let a = u * u + lat1r.cos() * lat2r.cos() * v * v;
    2.0 * EARTH_RADIUS_IN_METERS * a.sqrt().asin()
}

fn move_x(h: &mut Hash, d: i8) {
    let mut x = h.bits & 0xaaaaaaaaaaaaaaaa;
    let y = h.bits & 0x5555555555555555;
    let zz = 0x5555555555555555u64 >> (64 - h.step * 2);
    if d > 0 {
        x = x.wrapping_add(zz + 1);
    } else {
        x |= zz;
        x = x.wrapping_sub(zz + 1);
    }
    x &= 0xaaaaaaaaaaaaaaaau64 >> (64 - h.step * 2);
    h.bits = x | y;
}

fn move_y(h: &mut Hash, d: i8) {
    let x = h.bits & 0xaaaaaaaaaaaaaaaa;
    let mut y = h.bits & 0x5555555555555555;
    let zz = 0xaaaaaaaaaaaaaaaau64 >> (64 - h.step * 2);
    if d > 0 {
        y = y.wrapping_add(zz + 1);
    } else {
        y |= zz;
        y = y.wrapping_sub(zz + 1);
    }
    y &= 0x5555555555555555u64 >> (64 - h.step * 2);
    h.bits = x | y;
}

/// Redis's `geohashEstimateStepsByRadius`.
fn estimate_steps(mut range_m: f64, lat: f64) -> u32 {
    if range_m == 0.0 {
        return 26;
    }
    let mut step: i32 = 1;
    while range_m < MERCATOR_MAX {
        range_m *= 2.0;
        step += 1;
    }
    step -= 2;
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, 26) as u32
}

/// A search shape, with its unit conversion (meters per unit).
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub lon: f64,
    pub lat: f64,
    pub conversion: f64,
    pub kind: ShapeKind,
}

#[derive(Clone, Copy, Debug)]
pub enum ShapeKind {
    Radius(f64),
    Box { width: f64, height: f64 },
}

impl Shape {
    /// Redis's `geohashBoundingBox`: (min lon, min lat, max lon, max lat).
    fn bounding_box(&self) -> (f64, f64, f64, f64) {
        let (h, w) = match self.kind {
            ShapeKind::Radius(r) => (r, r),
            ShapeKind::Box { width, height } => (height / 2.0, width / 2.0),
        };
        let (h, w) = (h * self.conversion, w * self.conversion);
        let lat_delta = rad_deg(h / EARTH_RADIUS_IN_METERS);
        let top = rad_deg(w / EARTH_RADIUS_IN_METERS / deg_rad(self.lat + lat_delta).cos());
        let bottom = rad_deg(w / EARTH_RADIUS_IN_METERS / deg_rad(self.lat - lat_delta).cos());
        let south = self.lat < 0.0;
        let d = if south { bottom } else { top };
        (self.lon - d, self.lat - lat_delta, self.lon + d, self.lat + lat_delta)
    }

    /// Redis's `geoWithinShape` on a decoded point: the distance if the point is inside.
    fn contains(&self, lon: f64, lat: f64) -> Option<f64> {
        match self.kind {
            ShapeKind::Radius(r) => {
                let d = distance(self.lon, self.lat, lon, lat);
                (d <= r * self.conversion).then_some(d)
            }
            ShapeKind::Box { width, height } => {
                if lat_distance(lat, self.lat) > height * self.conversion / 2.0 {
                    return None;
                }
                if distance(lon, lat, self.lon, lat) > width * self.conversion / 2.0 {
                    return None;
                }
                Some(distance(self.lon, self.lat, lon, lat))
            }
        }
    }

    /// The geohash boxes to search, in Redis's order: the centre cell, then N, S, E, W, NE,
    /// NW, SE, SW; useless ones zeroed (Redis's `geohashCalculateAreasByShapeWGS84`).
    fn areas(&self) -> [Hash; 9] {
        let (min_lon, min_lat, max_lon, max_lat) = self.bounding_box();
        let radius_m = match self.kind {
            ShapeKind::Radius(r) => r,
            ShapeKind::Box { width, height } => ((width / 2.0).powi(2) + (height / 2.0).powi(2)).sqrt(),
        } * self.conversion;
        let mut steps = estimate_steps(radius_m, self.lat);
        let mut hash = encode_wgs84(self.lon, self.lat, steps).unwrap_or(Hash::ZERO);
        let mut nb = neighbors(hash);
        let mut area = decode_area(hash);
        let decrease = {
            let (n, s, e, w) = (decode_area(nb[0]), decode_area(nb[1]), decode_area(nb[2]), decode_area(nb[3]));
            n.lat.1 < max_lat || s.lat.0 > min_lat || e.lon.1 < max_lon || w.lon.0 > min_lon
        };
        if steps > 1 && decrease {
            steps -= 1;
            hash = encode_wgs84(self.lon, self.lat, steps).unwrap_or(Hash::ZERO);
            nb = neighbors(hash);
            area = decode_area(hash);
        }
        // nb: [north, south, east, west, north_east, north_west, south_east, south_west]
        if steps >= 2 {
            if area.lat.0 < min_lat {
                for i in [1, 7, 6] {
                    nb[i] = Hash::ZERO;
                }
            }
            if area.lat.1 > max_lat {
                for i in [0, 4, 5] {
                    nb[i] = Hash::ZERO;
                }
            }
            if area.lon.0 < min_lon {
                for i in [3, 7, 5] {
                    nb[i] = Hash::ZERO;
                }
            }
            if area.lon.1 > max_lon {
                for i in [2, 6, 4] {
                    nb[i] = Hash::ZERO;
                }
            }
        }
        [hash, nb[0], nb[1], nb[2], nb[3], nb[4], nb[5], nb[6], nb[7]]
    }
}

/// [north, south, east, west, north_east, north_west, south_east, south_west].
fn neighbors(h: Hash) -> [Hash; 8] {
    let mv = |dx: i8, dy: i8| {
        let mut n = h;
        if dx != 0 {
            move_x(&mut n, dx);
        }
        if dy != 0 {
            move_y(&mut n, dy);
        }
        n
    };
    [mv(0, 1), mv(0, -1), mv(1, 0), mv(-1, 0), mv(1, 1), mv(-1, 1), mv(1, -1), mv(-1, -1)]
}

/// One search hit.
struct Point {
    member: Box<[u8]>,
    dist: f64,
    score: f64,
    lon: f64,
    lat: f64,
}

/// Redis's `membersOfAllNeighbors`: every member inside `shape`, box by box, each box's
/// members in score order; stops after `limit` hits (0 = no limit; used by ANY).
fn search(z: &ZSet, shape: &Shape, limit: usize) -> Vec<Point> {
    let boxes = shape.areas();
    let mut out = Vec::new();
    let mut last: Option<usize> = None;
    for (i, h) in boxes.iter().enumerate() {
        if h.is_zero() {
            continue;
        }
        // Huge radii make adjacent boxes equal: skip a box equal to the previous one.
        if last.is_some_and(|l| boxes[l] == *h) {
            continue;
        }
        if limit > 0 && out.len() >= limit {
            break;
        }
        let shift = 52 - h.step * 2;
        let min = (h.bits << shift) as f64;
        let max = ((h.bits + 1) << shift) as f64;
        let range = ScoreRange { min, max, minex: false, maxex: true };
        let (a, b) = z.score_span(&range);
        if a < b {
            let mut stop = false;
            z.for_range(a, b - 1, false, |m, s| {
                if stop {
                    return;
                }
                let (lon, lat) = decode_score(s);
                if let Some(dist) = shape.contains(lon, lat) {
                    out.push(Point { member: m.into(), dist, score: s, lon, lat });
                    if limit > 0 && out.len() >= limit {
                        stop = true;
                    }
                }
            });
        }
        last = Some(i);
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Reply formats
// ---------------------------------------------------------------------------------------------

/// Redis's `addReplyHumanLongDouble`: `%.17Lf` with trailing zeros removed; a RESP3 double
/// or a RESP2 bulk string.
fn reply_human(ctx: &mut Ctx, v: f64) {
    let mut s = format!("{:.17}", v);
    if s.contains('.') {
        while s.ends_with('0') {
            s.pop();
        }
        if s.ends_with('.') {
            s.pop();
        }
    }
    if s == "-0" {
        s = "0".into();
    }
    match ctx.reply.proto {
        crate::protocol::Proto::Resp2 => ctx.reply.bulk(s.as_bytes()),
        crate::protocol::Proto::Resp3 => {
            ctx.reply.raw(b",");
            ctx.reply.raw(s.as_bytes());
            ctx.reply.raw(b"\r\n");
        }
    }
}

/// Redis's `addReplyDoubleDistance`: four decimals, a bulk string in both protocols.
fn reply_distance(ctx: &mut Ctx, d: f64) {
    ctx.reply.bulk(format!("{:.4}", d).as_bytes());
}

// ---------------------------------------------------------------------------------------------
// Argument helpers
// ---------------------------------------------------------------------------------------------

/// Redis's `extractLongLatOrReply`.
fn lon_lat(lon: &[u8], lat: &[u8]) -> Result<(f64, f64), CmdError> {
    let lon = parse_score(lon).ok_or(CmdError::NotFloat)?;
    let lat = parse_score(lat).ok_or(CmdError::NotFloat)?;
    if !(GEO_LONG_MIN..=GEO_LONG_MAX).contains(&lon) || !(GEO_LAT_MIN..=GEO_LAT_MAX).contains(&lat) {
        return Err(CmdError::msg(format!("ERR invalid longitude,latitude pair {:.6},{:.6}", lon, lat)));
    }
    Ok((lon, lat))
}

/// Redis's `extractUnitOrReply`: meters per unit.
fn unit(u: &[u8]) -> Result<f64, CmdError> {
    if eq_ic(u, "m") {
        Ok(1.0)
    } else if eq_ic(u, "km") {
        Ok(1000.0)
    } else if eq_ic(u, "ft") {
        Ok(0.3048)
    } else if eq_ic(u, "mi") {
        Ok(1609.34)
    } else {
        Err(CmdError::msg("ERR unsupported unit provided. please use M, KM, FT, MI"))
    }
}

/// Redis's `extractDistanceOrReply`: (radius, conversion).
fn radius_arg(r: &[u8], u: &[u8]) -> Result<(f64, f64), CmdError> {
    let r = parse_score(r).ok_or(CmdError::msg("ERR need numeric radius"))?;
    if r < 0.0 {
        return Err(CmdError::msg("ERR radius cannot be negative"));
    }
    Ok((r, unit(u)?))
}

// ---------------------------------------------------------------------------------------------
// Commands
// ---------------------------------------------------------------------------------------------

// GEOADD key [NX|XX] [CH] longitude latitude member [longitude latitude member ...]
pub fn geoadd(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.arg(1);
    let (mut f, mut ch) = (AddFlags::default(), false);
    let mut idx = 2;
    while idx < ctx.args.len() {
        let o = ctx.args[idx];
        if eq_ic(o, "nx") {
            f.nx = true;
        } else if eq_ic(o, "xx") {
            f.xx = true;
        } else if eq_ic(o, "ch") {
            ch = true;
        } else {
            break;
        }
        idx += 1;
    }
    if !(ctx.args.len() - idx).is_multiple_of(3) || (f.xx && f.nx) || idx == ctx.args.len() {
        return Err(CmdError::Syntax);
    }
    let mut pairs = Vec::new();
    let args = ctx.args;
    for t in args[idx..].chunks(3) {
        let (lon, lat) = lon_lat(t[0], t[1])?;
        let h = encode_wgs84(lon, lat, GEO_STEP_MAX).expect("validated");
        pairs.push((h.bits as f64, t[2]));
    }
    zadd_apply(ctx, key, f, ch, pairs)
}

// GEODIST key member1 member2 [M|KM|FT|MI]
pub fn geodist(ctx: &mut Ctx) -> CmdResult {
    let to_m = match ctx.args.len() {
        5 => unit(ctx.arg(4))?,
        n if n > 5 => return Err(CmdError::Syntax),
        _ => 1.0,
    };
    let (a, b) = (ctx.arg(2), ctx.arg(3));
    let scores = ctx.ks.read::<ZSet>(ctx.args[1])?.map(|z| (z.score(a), z.score(b)));
    match scores {
        Some((Some(s1), Some(s2))) => {
            let (x1, y1) = decode_score(s1);
            let (x2, y2) = decode_score(s2);
            reply_distance(ctx, distance(x1, y1, x2, y2) / to_m);
        }
        _ => ctx.reply.null(),
    }
    Ok(())
}

const GEO_ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";

/// The standard 11-character geohash of a score: decoded, then re-encoded over latitude ±90
/// (Redis stores ±85.05 Mercator ranges internally).
fn geohash_string(score: f64) -> [u8; 11] {
    let (lon, lat) = decode_score(score);
    let h = encode((-180.0, 180.0), (-90.0, 90.0), lon, lat, 26).unwrap_or(Hash::ZERO);
    let mut out = [b'0'; 11];
    for (i, c) in out.iter_mut().enumerate().take(10) {
        *c = GEO_ALPHABET[((h.bits >> (52 - (i + 1) * 5)) & 0x1f) as usize];
    }
    out
}

// GEOHASH key [member [member ...]]
pub fn geohash(ctx: &mut Ctx) -> CmdResult {
    let args = ctx.args;
    let scores: Vec<Option<f64>> = match ctx.ks.read::<ZSet>(args[1])? {
        Some(z) => args[2..].iter().map(|m| z.score(m)).collect(),
        None => vec![None; args.len() - 2],
    };
    ctx.reply.array(scores.len());
    for s in scores {
        match s {
            Some(s) => ctx.reply.bulk(&geohash_string(s)),
            None => ctx.reply.null(),
        }
    }
    Ok(())
}

// GEOPOS key [member [member ...]]
pub fn geopos(ctx: &mut Ctx) -> CmdResult {
    let args = ctx.args;
    let scores: Vec<Option<f64>> = match ctx.ks.read::<ZSet>(args[1])? {
        Some(z) => args[2..].iter().map(|m| z.score(m)).collect(),
        None => vec![None; args.len() - 2],
    };
    ctx.reply.array(scores.len());
    for s in scores {
        match s {
            Some(s) => {
                let (lon, lat) = decode_score(s);
                ctx.reply.array(2);
                reply_human(ctx, lon);
                reply_human(ctx, lat);
            }
            None => ctx.reply.null_array(),
        }
    }
    Ok(())
}

/// Which command family is searching (Redis's RADIUS_* / GEOSEARCH flags).
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    RadiusCoords,
    RadiusMember,
    Search,
    SearchStore,
}

#[derive(Clone, Copy, PartialEq)]
enum Sort {
    None,
    Asc,
    Desc,
}

/// Redis's `georadiusGeneric`: GEORADIUS[BYMEMBER][_RO], GEOSEARCH, GEOSEARCHSTORE.
fn georadius_generic(ctx: &mut Ctx, kind: Kind, src_idx: usize, nostore: bool) -> CmdResult {
    let args = ctx.args;
    let src = args[src_idx];
    // The source is looked up first: WRONGTYPE before any argument error.
    let zexists = ctx.ks.read::<ZSet>(src)?.is_some();
    let member_point = |ctx: &mut Ctx, m: &[u8]| -> Result<(f64, f64), CmdError> {
        let s = ctx.ks.read::<ZSet>(src)?.and_then(|z| z.score(m));
        s.map(decode_score).ok_or(CmdError::msg("ERR could not decode requested zset member"))
    };
    let mut center: Option<(f64, f64)> = None;
    let mut shape_kind: Option<(ShapeKind, f64)> = None;
    let mut store: Option<&[u8]> = None;
    let mut storedist = false;
    let base = match kind {
        Kind::RadiusCoords => {
            center = Some(lon_lat(args[2], args[3])?);
            let (r, conv) = radius_arg(args[4], args[5])?;
            shape_kind = Some((ShapeKind::Radius(r), conv));
            6
        }
        Kind::RadiusMember => {
            if zexists {
                center = Some(member_point(ctx, args[2])?);
                let (r, conv) = radius_arg(args[3], args[4])?;
                shape_kind = Some((ShapeKind::Radius(r), conv));
            }
            5
        }
        Kind::Search => 2,
        Kind::SearchStore => {
            store = Some(args[1]);
            3
        }
    };
    let is_search = matches!(kind, Kind::Search | Kind::SearchStore);
    let (mut withdist, mut withhash, mut withcoord, mut any) = (false, false, false, false);
    let (mut frommember, mut fromloc, mut byradius, mut bybox) = (false, false, false, false);
    let mut sort = Sort::None;
    let mut count: i64 = 0;
    let remaining = args.len().saturating_sub(base);
    let mut i = 0;
    while i < remaining {
        let a = args[base + i];
        let more = |n: usize| i + n < remaining;
        if eq_ic(a, "withdist") {
            withdist = true;
        } else if eq_ic(a, "withhash") {
            withhash = true;
        } else if eq_ic(a, "withcoord") {
            withcoord = true;
        } else if eq_ic(a, "any") {
            any = true;
        } else if eq_ic(a, "asc") {
            sort = Sort::Asc;
        } else if eq_ic(a, "desc") {
            sort = Sort::Desc;
        } else if eq_ic(a, "count") && more(1) {
            count = parse_int(args[base + i + 1])?;
            if count <= 0 {
                return Err(CmdError::msg("ERR COUNT must be > 0"));
            }
            i += 1;
        } else if (eq_ic(a, "store") || eq_ic(a, "storedist")) && more(1) && !nostore && !is_search {
            store = Some(args[base + i + 1]);
            storedist = eq_ic(a, "storedist");
            i += 1;
        } else if eq_ic(a, "storedist") && kind == Kind::SearchStore {
            storedist = true;
        } else if eq_ic(a, "frommember") && more(1) && is_search && !fromloc {
            if zexists {
                center = Some(member_point(ctx, args[base + i + 1])?);
            }
            frommember = true;
            i += 1;
        } else if eq_ic(a, "fromlonlat") && more(2) && is_search && !frommember {
            center = Some(lon_lat(args[base + i + 1], args[base + i + 2])?);
            fromloc = true;
            i += 2;
        } else if eq_ic(a, "byradius") && more(2) && is_search && !bybox {
            let (r, conv) = radius_arg(args[base + i + 1], args[base + i + 2])?;
            shape_kind = Some((ShapeKind::Radius(r), conv));
            byradius = true;
            i += 2;
        } else if eq_ic(a, "bybox") && more(3) && is_search && !byradius {
            let w = parse_score(args[base + i + 1]).ok_or(CmdError::msg("ERR need numeric width"))?;
            let h = parse_score(args[base + i + 2]).ok_or(CmdError::msg("ERR need numeric height"))?;
            if w < 0.0 || h < 0.0 {
                return Err(CmdError::msg("ERR height or width cannot be negative"));
            }
            let conv = unit(args[base + i + 3])?;
            shape_kind = Some((ShapeKind::Box { width: w, height: h }, conv));
            bybox = true;
            i += 3;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if store.is_some() && (withdist || withhash || withcoord) {
        return Err(CmdError::msg(format!(
            "ERR {} is not compatible with WITHDIST, WITHHASH and WITHCOORD options",
            if kind == Kind::SearchStore { "GEOSEARCHSTORE" } else { "STORE option in GEORADIUS" }
        )));
    }
    let name = String::from_utf8_lossy(args[0]).into_owned();
    if is_search && !(frommember || fromloc) {
        return Err(CmdError::msg(format!("ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for {name}")));
    }
    if is_search && !(byradius || bybox) {
        return Err(CmdError::msg(format!("ERR exactly one of BYRADIUS and BYBOX can be specified for {name}")));
    }
    if any && count == 0 {
        return Err(CmdError::msg("ERR the ANY argument requires COUNT argument"));
    }
    if !zexists {
        match store {
            Some(dst) => {
                if ctx.ks.delete(dst).is_some() {
                    ctx.ks.note(crate::services::notify::GENERIC, "del", dst);
                }
                ctx.reply.int(0);
            }
            None => ctx.reply.array(0),
        }
        return Ok(());
    }
    // COUNT without ANY returns the closest N: sorted ascending unless told otherwise.
    if count != 0 && sort == Sort::None && !any {
        sort = Sort::Asc;
    }
    let ((lon, lat), (sk, conv)) = (center.expect("parsed"), shape_kind.expect("parsed"));
    let shape = Shape { lon, lat, conversion: conv, kind: sk };
    let mut points = {
        let z = ctx.ks.read::<ZSet>(src)?.expect("exists");
        search(z, &shape, if any { count as usize } else { 0 })
    };
    let cmp = |a: &Point, b: &Point| a.dist.partial_cmp(&b.dist).unwrap_or(std::cmp::Ordering::Equal);
    match sort {
        Sort::Asc => points.sort_by(cmp),
        Sort::Desc => points.sort_by(|a, b| cmp(b, a)),
        Sort::None => {}
    }
    if count > 0 && (points.len() as i64) > count {
        points.truncate(count as usize);
    }
    for p in points.iter_mut() {
        p.dist /= conv;
    }
    if let Some(dst) = store {
        let items: Vec<(f64, Box<[u8]>)> =
            points.into_iter().map(|p| (if storedist { p.dist } else { p.score }, p.member)).collect();
        let lim = ZLimits::from_ctx(ctx);
        let event = if is_search { "geosearchstore" } else { "georadiusstore" };
        let n = store_zset(&mut ctx.ks, dst, ZSet::build(items, &lim), event);
        ctx.reply.int(n as i64);
        return Ok(());
    }
    let opts = withdist as usize + withhash as usize + withcoord as usize;
    ctx.reply.array(points.len());
    for p in &points {
        if opts > 0 {
            ctx.reply.array(opts + 1);
        }
        ctx.reply.bulk(&p.member);
        if withdist {
            reply_distance(ctx, p.dist);
        }
        if withhash {
            ctx.reply.int(p.score as i64);
        }
        if withcoord {
            ctx.reply.array(2);
            reply_human(ctx, p.lon);
            reply_human(ctx, p.lat);
        }
    }
    Ok(())
}

// GEORADIUS key longitude latitude radius M|KM|FT|MI [WITHCOORD] [WITHDIST] [WITHHASH]
//   [COUNT count [ANY]] [ASC|DESC] [STORE key | STOREDIST key]
pub fn georadius(ctx: &mut Ctx) -> CmdResult {
    georadius_generic(ctx, Kind::RadiusCoords, 1, false)
}

// GEORADIUS_RO key longitude latitude radius M|KM|FT|MI [WITHCOORD] [WITHDIST] [WITHHASH]
//   [COUNT count [ANY]] [ASC|DESC]
pub fn georadius_ro(ctx: &mut Ctx) -> CmdResult {
    georadius_generic(ctx, Kind::RadiusCoords, 1, true)
}

// GEORADIUSBYMEMBER key member radius M|KM|FT|MI [WITHCOORD] [WITHDIST] [WITHHASH]
//   [COUNT count [ANY]] [ASC|DESC] [STORE key | STOREDIST key]
pub fn georadiusbymember(ctx: &mut Ctx) -> CmdResult {
    georadius_generic(ctx, Kind::RadiusMember, 1, false)
}

// GEORADIUSBYMEMBER_RO key member radius M|KM|FT|MI [WITHCOORD] [WITHDIST] [WITHHASH]
//   [COUNT count [ANY]] [ASC|DESC]
pub fn georadiusbymember_ro(ctx: &mut Ctx) -> CmdResult {
    georadius_generic(ctx, Kind::RadiusMember, 1, true)
}

// GEOSEARCH key FROMMEMBER member | FROMLONLAT longitude latitude
//   BYRADIUS radius M|KM|FT|MI | BYBOX width height M|KM|FT|MI
//   [ASC|DESC] [COUNT count [ANY]] [WITHCOORD] [WITHDIST] [WITHHASH]
pub fn geosearch(ctx: &mut Ctx) -> CmdResult {
    georadius_generic(ctx, Kind::Search, 1, true)
}

// GEOSEARCHSTORE destination source FROMMEMBER member | FROMLONLAT longitude latitude
//   BYRADIUS radius M|KM|FT|MI | BYBOX width height M|KM|FT|MI
//   [ASC|DESC] [COUNT count [ANY]] [STOREDIST]
pub fn geosearchstore(ctx: &mut Ctx) -> CmdResult {
    georadius_generic(ctx, Kind::SearchStore, 2, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interleave_roundtrip() {
        for x in [0u32, 1, 0xdead_beef, u32::MAX, 0x0300_0001] {
            assert_eq!(squash(spread(x)), x);
            assert_eq!(squash(spread(x) << 1 >> 1), x);
        }
    }

    #[test]
    fn encode_decode_matches_redis() {
        // GEOADD Sicily 13.361389 38.115556 "Palermo": Redis stores score 3479099956230698.
        let h = encode_wgs84(13.361389, 38.115556, 26).unwrap();
        assert_eq!(h.bits, 3479099956230698);
        let (lon, lat) = decode_score(h.bits as f64);
        assert!((lon - 13.361389).abs() < 1e-5 && (lat - 38.115556).abs() < 1e-5);
        assert_eq!(&geohash_string(h.bits as f64), b"sqc8b49rny0");
        // GEODIST Sicily Palermo Catania = 166274.1516 m in Redis.
        let c = encode_wgs84(15.087269, 37.502669, 26).unwrap();
        let (x2, y2) = decode_score(c.bits as f64);
        assert_eq!(format!("{:.4}", distance(lon, lat, x2, y2)), "166274.1516");
        assert!(encode_wgs84(181.0, 0.0, 26).is_none());
    }

    #[test]
    fn neighbours_move_one_cell() {
        let h = encode_wgs84(10.0, 10.0, 10).unwrap();
        let [n, s, e, w, ..] = neighbors(h);
        let (c, na, sa, ea, wa) = (decode_area(h), decode_area(n), decode_area(s), decode_area(e), decode_area(w));
        assert!((na.lat.0 - c.lat.1).abs() < 1e-9 && (sa.lat.1 - c.lat.0).abs() < 1e-9);
        assert!((ea.lon.0 - c.lon.1).abs() < 1e-9 && (wa.lon.1 - c.lon.0).abs() < 1e-9);
        assert_eq!(estimate_steps(0.0, 0.0), 26);
        assert_eq!(estimate_steps(200_000.0, 0.0), 6);
    }
}
