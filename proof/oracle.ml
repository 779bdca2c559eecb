(* The proved oracle's main: kernel/merge's JSON-lines protocol around the functions
   extracted from the Coq proofs (oracle_core.ml). This file is the only unproved part: it
   reads a request line, refuses what is not a request (bad_request) exactly as
   kernel/merge's decoder does, calls the extracted function and prints the canonical
   response. Numbers are read with Yojson's Raw mode, which keeps every number literal as its
   text, so nothing is ever a float.

   --mutant=NAME plants a deliberate difference (tie, shard-limit, avg-round), so a test can
   show the differential test catches one on this side. *)

open Oracle_core

exception Bad of string * string (* field, message: a bad_request *)

let bad field fmt = Printf.ksprintf (fun m -> raise (Bad (field, m))) fmt

let mutant = ref ""

(* ---- integers between OCaml and Coq's Z ---- *)

let rec pos_of_int n = if n = 1 then XH else if n land 1 = 0 then XO (pos_of_int (n lsr 1)) else XI (pos_of_int (n lsr 1))
let z_of_int n = if n = 0 then Z0 else if n > 0 then Zpos (pos_of_int n) else Zneg (pos_of_int (-n))
let rec int_of_pos = function XH -> 1 | XO p -> 2 * int_of_pos p | XI p -> 2 * int_of_pos p + 1
let int_of_z = function Z0 -> 0 | Zpos p -> int_of_pos p | Zneg p -> - (int_of_pos p)
let rec int_of_nat = function O -> 0 | S n -> 1 + int_of_nat n

let z_of_digit_string neg s =
  z_of_digits neg (List.init (String.length s) (fun i -> z_of_int (Char.code s.[i] - 48)))

let string_of_z z =
  let ds = z_digits z in
  let b = Buffer.create 24 in
  (match z with Zneg _ -> Buffer.add_char b '-' | _ -> ());
  List.iter (fun d -> Buffer.add_char b (Char.chr (48 + int_of_z d))) ds;
  Buffer.contents b

let zmax_int64 = z_of_digit_string false "9223372036854775807"
let zmax_int32 = z_of_int 2147483647

(* ---- JSON strings: decoding Raw string literals as Go's encoding/json does ---- *)

let add_utf8 b c =
  let add i = Buffer.add_char b (Char.chr i) in
  if c < 0x80 then add c
  else if c < 0x800 then (add (0xC0 lor (c lsr 6)); add (0x80 lor (c land 0x3F)))
  else if c < 0x10000 then (add (0xE0 lor (c lsr 12)); add (0x80 lor ((c lsr 6) land 0x3F)); add (0x80 lor (c land 0x3F)))
  else (add (0xF0 lor (c lsr 18)); add (0x80 lor ((c lsr 12) land 0x3F)); add (0x80 lor ((c lsr 6) land 0x3F)); add (0x80 lor (c land 0x3F)))

(* The length of the valid UTF-8 sequence at s.[i], or 0 (Go's utf8.DecodeRune rules). *)
let utf8_len s i =
  let n = String.length s in
  let byte k = if i + k < n then Char.code s.[i + k] else -1 in
  let cont k = let c = byte k in c >= 0x80 && c <= 0xBF in
  let c0 = byte 0 in
  if c0 < 0x80 then 1
  else if c0 >= 0xC2 && c0 <= 0xDF then (if cont 1 then 2 else 0)
  else if c0 >= 0xE0 && c0 <= 0xEF then begin
    let c1 = byte 1 in
    let lo, hi = if c0 = 0xE0 then 0xA0, 0xBF else if c0 = 0xED then 0x80, 0x9F else 0x80, 0xBF in
    if c1 >= lo && c1 <= hi && cont 2 then 3 else 0
  end else if c0 >= 0xF0 && c0 <= 0xF4 then begin
    let c1 = byte 1 in
    let lo, hi = if c0 = 0xF0 then 0x90, 0xBF else if c0 = 0xF4 then 0x80, 0x8F else 0x80, 0xBF in
    if c1 >= lo && c1 <= hi && cont 2 && cont 3 then 4 else 0
  end else 0

let decode_string path lit =
  (* lit includes the quotes *)
  let n = String.length lit in
  let b = Buffer.create n in
  let hex i =
    if i + 4 > n - 1 then bad path "not JSON: bad \\u escape";
    int_of_string ("0x" ^ String.sub lit i 4) in
  let i = ref 1 in
  while !i < n - 1 do
    let c = lit.[!i] in
    if c = '\\' then begin
      let e = lit.[!i + 1] in
      (match e with
       | '"' -> Buffer.add_char b '"' | '\\' -> Buffer.add_char b '\\' | '/' -> Buffer.add_char b '/'
       | 'b' -> Buffer.add_char b '\b' | 'f' -> Buffer.add_char b '\012' | 'n' -> Buffer.add_char b '\n'
       | 'r' -> Buffer.add_char b '\r' | 't' -> Buffer.add_char b '\t'
       | 'u' ->
         let u = hex (!i + 2) in
         if u >= 0xD800 && u < 0xDC00 && !i + 11 < n && lit.[!i + 6] = '\\' && lit.[!i + 7] = 'u'
            && (let u2 = hex (!i + 8) in u2 >= 0xDC00 && u2 < 0xE000) then begin
           let u2 = hex (!i + 8) in
           add_utf8 b (0x10000 + ((u - 0xD800) lsl 10) + (u2 - 0xDC00));
           i := !i + 6
         end else if u >= 0xD800 && u < 0xE000 then add_utf8 b 0xFFFD
         else add_utf8 b u;
         i := !i + 4
       | _ -> bad path "not JSON: bad escape");
      i := !i + 2
    end else begin
      let l = utf8_len lit !i in
      if l = 0 then (add_utf8 b 0xFFFD; incr i)
      else (Buffer.add_string b (String.sub lit !i l); i := !i + l)
    end
  done;
  Buffer.contents b

(* ---- canonical output ---- *)

let add_json_string b s =
  Buffer.add_char b '"';
  let n = String.length s in
  let i = ref 0 in
  while !i < n do
    let c = s.[!i] in
    if Char.code c >= 0x80 then begin
      let l = utf8_len s !i in
      if l = 0 then (Buffer.add_string b "\\ufffd"; incr i)
      else (Buffer.add_string b (String.sub s !i l); i := !i + l)
    end else begin
      (match c with
       | '"' -> Buffer.add_string b "\\\"" | '\\' -> Buffer.add_string b "\\\\"
       | '\b' -> Buffer.add_string b "\\b" | '\012' -> Buffer.add_string b "\\f"
       | '\n' -> Buffer.add_string b "\\n" | '\r' -> Buffer.add_string b "\\r" | '\t' -> Buffer.add_string b "\\t"
       | c when Char.code c < 0x20 -> Buffer.add_string b (Printf.sprintf "\\u%04x" (Char.code c))
       | c -> Buffer.add_char b c);
      incr i
    end
  done;
  Buffer.add_char b '"'

let add_number b c s =
  let digits = String.concat "" (List.map (fun d -> string_of_int (int_of_z d)) (z_digits c)) in
  (match c with Zneg _ -> Buffer.add_char b '-' | _ -> ());
  let sc = int_of_z s in
  if sc = 0 then Buffer.add_string b digits
  else begin
    let d = if String.length digits <= sc then String.make (sc + 1 - String.length digits) '0' ^ digits else digits in
    let k = String.length d - sc in
    Buffer.add_string b (String.sub d 0 k); Buffer.add_char b '.'; Buffer.add_string b (String.sub d k sc)
  end

let bytes_of_list l = String.init (List.length l) (fun i -> Char.chr (int_of_z (List.nth l i)))

let add_value b = function
  | VNull -> Buffer.add_string b "null"
  | VBool t -> Buffer.add_string b (if t then "true" else "false")
  | VNum (c, s) -> add_number b c s
  | VText l -> add_json_string b (bytes_of_list l)

let add_list b f l =
  Buffer.add_char b '[';
  List.iteri (fun i x -> if i > 0 then Buffer.add_char b ','; f b x) l;
  Buffer.add_char b ']'

let add_row b r = add_list b add_value r
let add_int b i = Buffer.add_string b (string_of_int i)

(* ---- reading requests (kernel/merge/request.go) ---- *)

type json = Yojson.Raw.t

let kind_of (j : json) = match j with
  | `Assoc _ -> "an object" | `List _ -> "an array" | `Stringlit _ -> "a string"
  | `Bool _ -> "a boolean" | `Null -> "null" | `Intlit _ | `Floatlit _ -> "a number" | _ -> "not JSON"

let sub path key = if path = "" then key else path ^ "." ^ key

let obj path allowed (j : json) =
  match j with
  | `Assoc kvs ->
    let seen = Hashtbl.create 8 in
    List.iter (fun (k, _) ->
        if Hashtbl.mem seen k then bad (sub path k) "appears twice";
        Hashtbl.add seen k ();
        if not (List.mem k allowed) then bad (sub path k) "unknown field (allowed here: %s)" (String.concat ", " allowed))
      kvs;
    kvs
  | _ -> bad path "must be an object, not %s" (kind_of j)

let get kvs k = List.assoc_opt k kvs
let is_null = function None | Some `Null -> true | _ -> false

let arr path (j : json) = match j with `List l -> l | _ -> bad path "must be an array, not %s" (kind_of j)

let is_digits s = String.length s > 0 && String.for_all (fun c -> c >= '0' && c <= '9') s

(* A JSON integer literal of up to 1000 characters. *)
let integer path (j : json) =
  match j with
  | `Intlit s ->
    if String.length s > 1000 then bad path "an integer of %d characters is longer than the 1000 this protocol reads" (String.length s);
    let neg = String.length s > 0 && s.[0] = '-' in
    let body = if neg || (String.length s > 0 && s.[0] = '+') then String.sub s 1 (String.length s - 1) else s in
    if not (is_digits body) || (String.length s > 0 && s.[0] = '+') then bad path "%s is not an integer" s;
    z_of_digit_string neg body
  | `Floatlit s -> bad path "%s is not an integer (no fraction or exponent)" s
  | _ -> bad path "must be an integer, not %s" (kind_of j)

let z_in path j lo hi =
  let x = integer path j in
  if Z.ltb x lo || Z.ltb hi x then bad path "%s is outside %s..%s" (string_of_z x) (string_of_z lo) (string_of_z hi);
  x

let column path j = z_in path j Z0 zmax_int32

let str path (j : json) = match j with `Stringlit s -> decode_string path s | _ -> bad path "must be a string, not %s" (kind_of j)

let text_value s = VText (List.init (String.length s) (fun i -> z_of_int (Char.code s.[i])))

(* ParseDecimal of value.go: sign, digits, optionally a point and digits; no exponent. *)
let decimal path s =
  let n = String.length s in
  let neg, body = if n > 0 && (s.[0] = '-' || s.[0] = '+') then s.[0] = '-', String.sub s 1 (n - 1) else false, s in
  let ip, frac = match String.index_opt body '.' with
    | Some k -> String.sub body 0 k, String.sub body (k + 1) (String.length body - k - 1)
    | None -> body, "" in
  if ip = "" && frac = "" then bad path "%S is not a number" s;
  String.iter (fun c -> if c = 'e' || c = 'E' then bad path "%S has an exponent; write numbers as plain digits" s) (ip ^ frac);
  if not (String.for_all (fun c -> c >= '0' && c <= '9') (ip ^ frac)) then bad path "%S is not a number" s;
  if String.length frac > 16383 then bad path "too many digits after the point";
  let lead = let k = ref 0 in while !k < String.length ip && ip.[!k] = '0' do incr k done; !k in
  if String.length ip - lead > 131072 then bad path "too many digits before the point";
  let all = ip ^ frac in
  VNum (z_of_digit_string neg (if all = "" then "0" else all), z_of_int (String.length frac))

let value path (j : json) =
  match j with
  | `Null -> VNull
  | `Bool b -> VBool b
  | `Stringlit s -> text_value (decode_string path s)
  | `Intlit s | `Floatlit s -> decimal path s
  | _ -> bad path "a value must be null, a boolean, a number or a string, not %s" (kind_of j)

let idx path i = path ^ "[" ^ string_of_int i ^ "]"

let shard_rows path j =
  List.mapi (fun s sj ->
      let sp = idx path s in
      List.mapi (fun r rj -> let rp = idx sp r in List.mapi (fun c vj -> value (idx rp c) vj) (arr rp rj)) (arr sp sj))
    (arr path j)

let required kvs k = match get kvs k with Some j -> j | None -> bad k "missing"

type request =
  | RMerge of key list * z option * z * row list list
  | RAgg of z list * agg list * bool * row list list
  | RRanges of range * range list list
  | RModulus of z * z list list

let refused = ref None

let merge_req kvs =
  let keys = arr "order" (required kvs "order") in
  let order = List.mapi (fun i kj ->
      let at = idx "order" i in
      let km = obj at ["col"; "dir"; "nulls"] kj in
      let c = match get km "col" with None -> bad (at ^ ".col") "missing" | Some j -> column (at ^ ".col") j in
      let desc = match get km "dir" with
        | None -> false
        | Some j -> (match str (at ^ ".dir") j with "asc" -> false | "desc" -> true | d -> bad (at ^ ".dir") "%S is not asc or desc" d) in
      let nulls = match get km "nulls" with
        | None -> None
        | Some j -> (match str (at ^ ".nulls") j with "first" -> Some true | "last" -> Some false
                                                        | d -> bad (at ^ ".nulls") "%S is not first or last" d) in
      { kcol = c; kdesc = desc; knulls = nulls }) keys in
  let lim = if is_null (get kvs "limit") then None else Some (z_in "limit" (Option.get (get kvs "limit")) Z0 zmax_int64) in
  let off = match get kvs "offset" with None -> Z0 | Some j -> z_in "offset" j Z0 zmax_int64 in
  let shards = shard_rows "shards" (required kvs "shards") in
  RMerge (order, lim, off, shards)

let not_decomposable = [ "array_agg"; "string_agg"; "json_agg"; "jsonb_agg"; "json_object_agg"; "jsonb_object_agg";
                         "percentile_cont"; "percentile_disc"; "mode"; "stddev"; "stddev_pop"; "stddev_samp";
                         "variance"; "var_pop"; "var_samp" ]

let agg_req kvs =
  let gb = match get kvs "group_by" with
    | None -> []
    | Some j -> List.mapi (fun i c -> column (idx "group_by" i) c) (arr "group_by" j) in
  let aggs = List.mapi (fun i aj ->
      let at = idx "aggs" i in
      let am = obj at ["fn"; "col"; "distinct"] aj in
      let name = match get am "fn" with None -> bad (at ^ ".fn") "missing" | Some j -> str (at ^ ".fn") j in
      let fn = match name with
        | "count" -> Some Count | "sum" -> Some Sum | "min" -> Some Min | "max" -> Some Max | "avg" -> Some Avg
        | n when List.mem n not_decomposable -> (if !refused = None then refused := Some (i, n)); None
        | n -> bad (at ^ ".fn") "%S is not an aggregate this reference knows (count, sum, min, max, avg)" n in
      let fn, c =
        if not (is_null (get am "col")) then fn, column (at ^ ".col") (Option.get (get am "col"))
        else match fn with
          | Some Count -> Some CountStar, Z0
          | None -> None, Z0
          | Some _ -> bad (at ^ ".col") "missing (only count may leave it out, for count(*))" in
      let distinct = match get am "distinct" with
        | None -> false
        | Some (`Bool d) -> d
        | Some j -> bad (at ^ ".distinct") "must be true or false, not %s" (kind_of j) in
      if distinct && fn = Some CountStar then bad (at ^ ".distinct") "count(distinct *) is not SQL; give count a column";
      { afn = (match fn with Some f -> f | None -> CountStar); acol = c; adistinct = distinct }) (arr "aggs" (required kvs "aggs")) in
  let raw = match str "input" (required kvs "input") with
    | "rows" -> true | "partials" -> false | s -> bad "input" "%S is not rows or partials" s in
  let shards = shard_rows "shards" (required kvs "shards") in
  RAgg (gb, aggs, raw, shards)

let span path j =
  match arr path j with
  | [lo; hi] ->
    let lo = integer (path ^ "[0]") lo and hi = integer (path ^ "[1]") hi in
    if not (Z.ltb lo hi) then bad path "[%s, %s) is empty: a range [lo, hi) needs lo < hi" (string_of_z lo) (string_of_z hi);
    (lo, hi)
  | l -> bad path "a range is [lo, hi], two integers, not %d values" (List.length l)

let partition_req kvs =
  let sj = get kvs "space" and mj = get kvs "modulus" in
  if (sj = None) = (mj = None) then bad "space" "give exactly one of space (ranges) and modulus (remainders)";
  let parts = arr "parts" (required kvs "parts") in
  match mj with
  | Some mj ->
    let m = integer "modulus" mj in
    if not (Z.ltb Z0 m) then bad "modulus" "%s is not a positive integer" (string_of_z m);
    RModulus (m, List.mapi (fun i p -> let pp = idx "parts" i in List.mapi (fun j r -> integer (idx pp j) r) (arr pp p)) parts)
  | None ->
    let space = span "space" (Option.get sj) in
    RRanges (space, List.mapi (fun i p -> let pp = idx "parts" i in List.mapi (fun j r -> span (idx pp j) r) (arr pp p)) parts)

let decode line =
  let j = try Yojson.Raw.from_string line with Yojson.Json_error m -> bad "" "not JSON: %s" m in
  let kvs = obj "" ["op"; "order"; "limit"; "offset"; "shards"; "group_by"; "aggs"; "input"; "space"; "parts"; "modulus"] j in
  let op = match get kvs "op" with None -> bad "op" "missing (merge, aggregate or partition_check)" | Some o -> str "op" o in
  let allowed = match op with
    | "merge" -> ["op"; "order"; "limit"; "offset"; "shards"]
    | "aggregate" -> ["op"; "group_by"; "aggs"; "input"; "shards"]
    | "partition_check" -> ["op"; "space"; "parts"; "modulus"]
    | o -> bad "op" "%S is not merge, aggregate or partition_check" o in
  List.iter (fun (k, _) -> if not (List.mem k allowed) then bad k "unknown field for op %S" op) kvs;
  match op with
  | "merge" -> merge_req kvs
  | "aggregate" -> agg_req kvs
  | _ -> partition_req kvs

(* ---- responses ---- *)

let error b kind field msg =
  Buffer.add_string b "{\"ok\":false,\"kind\":"; add_json_string b kind;
  Buffer.add_string b ",\"field\":"; add_json_string b field;
  Buffer.add_string b ",\"error\":"; add_json_string b ("merge: " ^ (if field = "" then "" else field ^ ": ") ^ msg);
  Buffer.add_string b "}\n"

let refusal_error b = function
  | BadData -> error b "bad_data" "" "the data does not fit the query (proved oracle)"
  | Unsorted -> error b "unsorted" "" "a shard's rows are not sorted by the ORDER BY (proved oracle)"
  | NotDecomposable -> error b "not_decomposable" "" "count, sum or avg with distinct is not decomposable (proved oracle)"

let add_agg b (f, c) =
  Buffer.add_string b "{\"fn\":";
  add_json_string b (match f with CountStar | Count -> "count" | Sum -> "sum" | Min -> "min" | Max -> "max" | Avg -> "avg");
  if f <> CountStar then (Buffer.add_string b ",\"col\":"; Buffer.add_string b (string_of_z c));
  Buffer.add_char b '}'

let answer b req =
  match req with
  | RMerge (order, lim, off, shards) ->
    let shards' = if !mutant = "tie" then List.rev shards else shards in
    (match merge_answer order lim off shards' with
     | Refused r -> refusal_error b r
     | Ok (rows, sl) ->
       let k = List.length shards in
       let from i = if !mutant = "tie" then k - 1 - int_of_nat i else int_of_nat i in
       let sl = if !mutant = "shard-limit" then (match lim with Some l when l <> Z0 -> Some l | _ -> sl) else sl in
       Buffer.add_string b "{\"ok\":true,\"rows\":"; add_list b (fun b (_, r) -> add_row b r) rows;
       Buffer.add_string b ",\"from\":"; add_list b (fun b (i, _) -> add_int b (from i)) rows;
       Buffer.add_string b ",\"shard_limit\":";
       (match sl with None -> Buffer.add_string b "null" | Some n -> Buffer.add_string b (string_of_z n));
       Buffer.add_string b "}\n")
  | RAgg (gb, aggs, raw, shards) ->
    (match aggregate_answer gb aggs raw shards with
     | Refused r -> refusal_error b r
     | Ok (rows, parts) ->
       let rows = if !mutant = "avg-round" then
           List.map (List.map (function VNum (c, s) when int_of_z s >= 16 -> VNum (Z.add c (Zpos XH), s) | v -> v)) rows
         else rows in
       Buffer.add_string b "{\"ok\":true,\"rows\":"; add_list b add_row rows;
       Buffer.add_string b ",\"partials\":"; add_list b add_agg parts;
       Buffer.add_string b "}\n")
  | RRanges _ | RModulus _ ->
    let f = match req with RRanges (sp, ps) -> check sp ps | RModulus (m, rs) -> check_modulus m rs | _ -> assert false in
    (match f with
     | Partition -> Buffer.add_string b "{\"ok\":true,\"partition\":true}\n"
     | EmptyPart i -> Buffer.add_string b ("{\"ok\":true,\"partition\":false,\"empty_part\":" ^ string_of_int (int_of_nat i) ^ "}\n")
     | At (x, own) ->
       Buffer.add_string b ("{\"ok\":true,\"partition\":false,\"at\":" ^ string_of_z x ^ ",\"owners\":");
       add_list b (fun b i -> add_int b (int_of_nat i)) own;
       Buffer.add_string b "}\n")

let respond b line =
  refused := None;
  match decode line with
  | exception Bad (field, msg) -> error b "bad_request" field msg
  | req ->
    (match !refused with
     | Some (i, name) -> error b "not_decomposable" (idx "aggs" i) (name ^ " is not decomposable")
     | None -> answer b req)

let () =
  Array.iteri (fun i a ->
      if i > 0 then
        if String.length a > 9 && String.sub a 0 9 = "--mutant=" then mutant := String.sub a 9 (String.length a - 9)
        else (prerr_endline ("oracle: unknown argument " ^ a ^ " (the only one is --mutant=tie|shard-limit|avg-round)"); exit 2))
    Sys.argv;
  let b = Buffer.create 65536 in
  try
    while true do
      let line = input_line stdin in
      if String.trim line <> "" then begin
        Buffer.clear b;
        respond b line;
        print_string (Buffer.contents b);
        flush stdout
      end
    done
  with End_of_file -> flush stdout
