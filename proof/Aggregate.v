(** Aggregates decomposed across shards, exactly as kernel/merge does it (aggregate.go,
    numeric.go): COUNT( * ), COUNT, SUM, MIN, MAX and AVG (as SUM and COUNT, divided as
    Postgres's numeric_div divides), with GROUP BY (NULLs in one group, numbers by value). *)
From Coq Require Import ZArith List Bool Lia Sorting.Sorted Sorting.Permutation.
From Loam Require Import Values Merge.
Import ListNotations.
Open Scope Z_scope.

Inductive func := CountStar | Count | Sum | Min | Max | Avg.

Definition func_eqb (a b : func) : bool :=
  match a, b with
  | CountStar, CountStar | Count, Count | Sum, Sum | Min, Min | Max, Max | Avg, Avg => true
  | _, _ => false
  end.

(** One requested aggregate; [acol] is ignored for COUNT( * ). *)
Record agg := { afn : func; acol : Z; adistinct : bool }.

(** A partial: what a shard computes (no AVG, no DISTINCT); COUNT( * )'s column is 0. *)
Definition partial := (func * Z)%type.

Inductive final := FOne (f : func) (p : nat) | FAvg (p q : nat).

Record plan := { group_by : list Z; partials : list partial; finals : list final }.

Fixpoint index_of (x : partial) (l : list partial) : option nat :=
  match l with
  | [] => None
  | y :: l' => if func_eqb (fst x) (fst y) && (snd x =? snd y) then Some 0%nat
               else option_map S (index_of x l')
  end.

(** [need f c ps]: the index of partial (f, c) in ps, appending it when it is not there. *)
Definition need (f : func) (c : Z) (ps : list partial) : nat * list partial :=
  let x := (f, match f with CountStar => 0 | _ => c end) in
  match index_of x ps with
  | Some i => (i, ps)
  | None => (length ps, ps ++ [x])
  end.

(** Decompose: a plan, or the refusal of COUNT, SUM or AVG with DISTINCT. *)
Fixpoint decompose_aux (aggs : list agg) (ps : list partial) (fs : list final)
  : outcome (list partial * list final) :=
  match aggs with
  | [] => Ok (ps, rev fs)
  | a :: aggs' =>
      if adistinct a && match afn a with Count | Sum | Avg => true | _ => false end
      then Refused NotDecomposable
      else match afn a with
           | Avg =>
               let (p, ps1) := need Sum (acol a) ps in
               let (q, ps2) := need Count (acol a) ps1 in
               decompose_aux aggs' ps2 (FAvg p q :: fs)
           | f =>
               let (p, ps1) := need f (acol a) ps in
               decompose_aux aggs' ps1 (FOne f p :: fs)
           end
  end.

Definition decompose (gb : list Z) (aggs : list agg) : outcome plan :=
  match decompose_aux aggs [] [] with
  | Ok (ps, fs) => Ok {| group_by := gb; partials := ps; finals := fs |}
  | Refused r => Refused r
  end.

(** ** Exact sums *)

Definition pow10 (n : Z) : Z := 10 ^ n.

(** A SUM shows the largest display scale of its inputs. *)
Definition num_add (a b : Z * Z) : Z * Z :=
  let '(c1, s1) := a in let '(c2, s2) := b in
  let s := Z.max s1 s2 in (c1 * pow10 (s - s1) + c2 * pow10 (s - s2), s).

(** ** Postgres's numeric division for AVG (numeric.c: select_div_scale, div_var) *)

(** The number of decimal digits of n > 0: from an underestimate of log10 n through log2
    (0.30102 < log10 2), counted up; no repeated division, so long numbers stay cheap. *)
Fixpoint count_up (fuel : nat) (n e : Z) : Z :=
  match fuel with
  | O => e + 1
  | S f => if 10 ^ (e + 1) <=? n then count_up f n (e + 1) else e + 1
  end.

Definition ndigits (n : Z) : Z := count_up 8 n (Z.log2 n * 30102 / 100000).

(** The weight (power of 10000) and leading base-10000 digit of coef × 10^-scale; (0, 0)
    for zero. *)
Definition nbase_lead (c s : Z) : Z * Z :=
  if c =? 0 then (0, 0) else
  let a := Z.abs c in
  let e := ndigits a - s in
  let w := (e - 1) / 4 in
  let sh := 4 * w + s in
  (w, if 0 <=? sh then a / pow10 sh else a * pow10 (- sh)).

Definition min_sig_digits := 16.
Definition max_display_scale := 1000.

(** AVG = sum / count, count > 0: at least 16 significant digits and no fewer decimals than
    the sum shows (at most 1000), rounded half away from zero. *)
Definition avg_of (c s n : Z) : value :=
  let '(w1, f1) := nbase_lead c s in
  let '(w2, f2) := nbase_lead n 0 in
  let q := if f1 <=? f2 then w1 - w2 - 1 else w1 - w2 in
  let rscale := Z.min (Z.max (Z.max (min_sig_digits - q * 4) s) 0) max_display_scale in
  let d := rscale - s in
  let num := if 0 <? d then c * pow10 d else c in
  let den := if d <? 0 then n * pow10 (- d) else n in
  let quo := Z.quot num den in
  let rem := Z.rem num den in
  let quo' := if negb (rem =? 0) && (den <=? 2 * Z.abs rem)
              then (if num <? 0 then quo - 1 else quo + 1) else quo in
  VNum quo' rscale.

(** ** Partial states *)

Record pstate := { pcount : Z; psum : option (Z * Z); pbest : option value }.

Definition pempty : pstate := {| pcount := 0; psum := None; pbest := None |}.

Definition is_number (v : value) : bool := match v with VNum _ _ => true | _ => false end.

(** The int64 form of an integer (AsInt64 of value.go). *)
Definition as_int64 (v : value) : option Z :=
  match v with
  | VNum c 0 => if (- max_int64 - 1 <=? c) && (c <=? max_int64) then Some c else None
  | _ => None
  end.

(** MIN and MAX keep the last of equal values, as Postgres's numeric_smaller/larger do. *)
Definition fold_best (f : func) (v : value) (st : pstate) : pstate :=
  match v with
  | VNull => st
  | _ =>
      let keep := match pbest st with
                  | None => false
                  | Some b => match f, vcmp v b with Min, Gt | Max, Lt => true | _, _ => false end
                  end in
      if keep then st else {| pcount := pcount st; psum := psum st; pbest := Some v |}
  end.

Definition fold_sum (v : value) (st : pstate) : outcome pstate :=
  match v with
  | VNull => Ok st
  | VNum c s => Ok {| pcount := pcount st; pbest := pbest st;
                      psum := Some (match psum st with None => (c, s) | Some x => num_add x (c, s) end) |}
  | _ => Refused BadData
  end.

(** Folding one raw row's value. *)
Definition fold_raw (f : func) (v : value) (st : pstate) : outcome pstate :=
  match f with
  | CountStar => Ok {| pcount := pcount st + 1; psum := psum st; pbest := pbest st |}
  | Count => Ok (if is_null v then st else {| pcount := pcount st + 1; psum := psum st; pbest := pbest st |})
  | Sum | Avg => fold_sum v st
  | Min | Max => Ok (fold_best f v st)
  end.

(** Folding one shard's partial value. *)
Definition fold_partial (f : func) (v : value) (st : pstate) : outcome pstate :=
  match f with
  | CountStar | Count =>
      match as_int64 v with
      | Some n => if (0 <=? n) && (pcount st + n <=? max_int64)
                  then Ok {| pcount := pcount st + n; psum := psum st; pbest := pbest st |}
                  else Refused BadData
      | None => Refused BadData
      end
  | Sum | Avg => fold_sum v st
  | Min | Max => Ok (fold_best f v st)
  end.

Definition pvalue (f : func) (st : pstate) : value :=
  match f with
  | CountStar | Count => VNum (pcount st) 0
  | Sum | Avg => match psum st with None => VNull | Some (c, s) => VNum c s end
  | Min | Max => match pbest st with None => VNull | Some v => v end
  end.

(** ** Groups *)

Definition group := (row * list pstate)%type.

Fixpoint key_eqb (a b : row) : bool :=
  match a, b with
  | [], [] => true
  | x :: a', y :: b' => match vcmp x y with Eq => key_eqb a' b' | _ => false end
  | _, _ => false
  end.

(** Update the group of [k] (appended, with the key as first seen, when new). *)
Fixpoint upd_group (k : row) (np : nat) (u : list pstate -> outcome (list pstate)) (gs : list group)
  : outcome (list group) :=
  match gs with
  | [] => match u (repeat pempty np) with Ok ps => Ok [(k, ps)] | Refused r => Refused r end
  | (k', ps) :: gs' =>
      if key_eqb k k' then match u ps with Ok ps' => Ok ((k', ps') :: gs') | Refused r => Refused r end
      else match upd_group k np u gs' with Ok gs'' => Ok ((k', ps) :: gs'') | Refused r => Refused r end
  end.

Fixpoint fold_all (fold : func -> value -> pstate -> outcome pstate)
         (fs : list func) (vs : list value) (ps : list pstate) : outcome (list pstate) :=
  match fs, vs, ps with
  | f :: fs', v :: vs', p :: ps' =>
      match fold f v p with
      | Ok p' => match fold_all fold fs' vs' ps' with Ok ps'' => Ok (p' :: ps'') | Refused r => Refused r end
      | Refused r => Refused r
      end
  | _, _, _ => Ok ps
  end.

Definition pfuncs (p : plan) : list func := map fst (partials p).

Definition raw_width (p : plan) : Z :=
  Z.max (fold_right (fun c w => Z.max (c + 1) w) 0 (group_by p))
        (fold_right (fun pa w => match fst pa with CountStar => w | _ => Z.max (snd pa + 1) w end) 0 (partials p)).

Definition add_raw_row (p : plan) (gs : list group) (r : row) : outcome (list group) :=
  if negb (wide_enough (raw_width p) r) then Refused BadData else
  let k := map (fun c => col c r) (group_by p) in
  let vs := map (fun pa => match fst pa with CountStar => VNull | _ => col (snd pa) r end) (partials p) in
  upd_group k (length (partials p)) (fold_all fold_raw (pfuncs p) vs) gs.

Fixpoint fold_rows {A} (step : list group -> A -> outcome (list group)) (gs : list group) (rs : list A)
  : outcome (list group) :=
  match rs with
  | [] => Ok gs
  | r :: rs' => match step gs r with Ok gs' => fold_rows step gs' rs' | Refused e => Refused e end
  end.

(** Groups ascending by key, NULLs last (the keys are distinct, so the order is total). *)
Definition group_order (n : nat) : list key :=
  map (fun i => {| kcol := Z.of_nat i; kdesc := false; knulls := None |}) (seq 0 n).

Definition sort_groups (ng : nat) (gs : list group) : list group :=
  isort (fun a b : group => match rows_cmp (group_order ng) (fst a) (fst b) with Gt => false | _ => true end) gs.

Definition with_empty (p : plan) (gs : list group) : list group :=
  match group_by p, gs with
  | [], [] => [([], repeat pempty (length (partials p)))]
  | _, _ => gs
  end.

Definition partial_rows (p : plan) (gs : list group) : list row :=
  map (fun g => fst g ++ map (fun '(pa, st) => pvalue (fst pa) st) (combine (partials p) (snd g)))
      (sort_groups (length (group_by p)) (with_empty p gs)).

(** What one shard's query returns for its raw rows (Plan.ShardRows). *)
Definition shard_rows (p : plan) (rs : list row) : outcome (list row) :=
  match fold_rows (add_raw_row p) [] rs with
  | Ok gs => Ok (partial_rows p gs)
  | Refused e => Refused e
  end.

(** One shard's partial row folded in: exactly the plan's width, each partial folded, and the
    two partials of an AVG agreeing (SUM is NULL exactly when COUNT is 0). *)
Definition avg_consistent (p : plan) (ng : nat) (r : row) : bool :=
  forallb (fun f => match f with
                    | FAvg ip iq =>
                        let n := match as_int64 (nth (ng + iq) r VNull) with Some n => n | None => 0 end in
                        Bool.eqb (n =? 0) (is_null (nth (ng + ip) r VNull))
                    | FOne _ _ => true
                    end) (finals p).

Definition add_partial_row (p : plan) (gs : list group) (r : row) : outcome (list group) :=
  let ng := length (group_by p) in
  if negb (Nat.eqb (length r) (ng + length (partials p))) then Refused BadData else
  match upd_group (firstn ng r) (length (partials p)) (fold_all fold_partial (pfuncs p) (skipn ng r)) gs with
  | Ok gs' => if avg_consistent p ng r then Ok gs' else Refused BadData
  | Refused e => Refused e
  end.

Definition final_value (p : plan) (g : group) (f : final) : value :=
  match f with
  | FOne fn i => pvalue fn (nth i (snd g) pempty)
  | FAvg i j =>
      let n := pcount (nth j (snd g) pempty) in
      if n =? 0 then VNull else
      match psum (nth i (snd g) pempty) with
      | Some (c, s) => avg_of c s n
      | None => VNull
      end
  end.

(** The answer from the shards' partial rows (Plan.Combine). *)
Definition combine_partials (p : plan) (ss : list (list row)) : outcome (list row) :=
  match fold_rows (add_partial_row p) [] (concat ss) with
  | Ok gs => Ok (map (fun g => fst g ++ map (final_value p g) (finals p))
                     (sort_groups (length (group_by p)) (with_empty p gs)))
  | Refused e => Refused e
  end.

Fixpoint all_ok {A} (l : list (outcome A)) : outcome (list A) :=
  match l with
  | [] => Ok []
  | Ok a :: l' => match all_ok l' with Ok as' => Ok (a :: as') | Refused e => Refused e end
  | Refused e :: _ => Refused e
  end.

(** The request: input "rows" runs every shard's partial query, then combines; input
    "partials" combines what the shards returned. *)
Definition aggregate_answer (gb : list Z) (aggs : list agg) (raw : bool) (ss : list (list row))
  : outcome (list row * list partial) :=
  match decompose gb aggs with
  | Refused e => Refused e
  | Ok p =>
      let input := if raw then all_ok (map (shard_rows p) ss) else Ok ss in
      match input with
      | Refused e => Refused e
      | Ok parts => match combine_partials p parts with
                    | Ok rows => Ok (rows, partials p)
                    | Refused e => Refused e
                    end
      end
  end.
