use super::*;

fn values(r: Result<(usize, Vec<Result<Vec<f32>>>)>) -> (usize, Vec<f32>) {
    let (mine, theirs) = r.unwrap();
    (mine, theirs.into_iter().map(|r| r.unwrap()[0]).collect())
}

#[test]
fn runs_every_task_and_the_caller_s_part_many_times() {
    let w = Workers::new(3);
    assert_eq!(w.len(), 3);
    for round in 0..2000 {
        let tasks: Vec<Task> = (0..3).map(|i| Box::new(move || Ok(vec![(round * 10 + i) as f32])) as Task).collect();
        let (mine, got) = values(w.run(tasks, || round));
        assert_eq!(mine, round);
        assert_eq!(got, [(round * 10) as f32, (round * 10 + 1) as f32, (round * 10 + 2) as f32]);
        if round == 1000 {
            // Long enough for the workers to fall asleep: they must wake for the next task.
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let (_, r) = w.run(vec![Box::new(|| Err(rayo::Error::EmptyInput { op: "t" }.into())) as Task], || ()).unwrap();
    assert!(r[0].is_err());
    let e = w.run((0..4).map(|_| Box::new(|| Ok(vec![])) as Task).collect(), || ()).unwrap_err();
    assert!(e.to_string().contains("4 tasks for 3 CPU workers"), "{e}");
}

/// A task whose worker has not started it when the caller's share is done is run by the
/// caller: with the worker asleep and the caller's share instant, every result still comes.
#[test]
fn tasks_not_started_are_taken_back_by_the_caller() {
    let w = Workers::new(2);
    for round in 0..200 {
        if round % 50 == 0 {
            std::thread::sleep(Duration::from_millis(5));
        }
        let tasks: Vec<Task> = (0..2).map(|i| Box::new(move || Ok(vec![i as f32])) as Task).collect();
        let (_, got) = values(w.run(tasks, || 0));
        assert_eq!(got, [0.0, 1.0]);
    }
}

/// A task that runs longer than the caller's poll (the caller falls asleep) still hands its
/// result back.
#[test]
fn a_long_task_wakes_the_sleeping_caller() {
    let w = Workers::new(1);
    for _ in 0..5 {
        let task: Task = Box::new(|| {
            std::thread::sleep(Duration::from_millis(10));
            Ok(vec![7.0])
        });
        let (_, got) = values(w.run(vec![task], || {
            // Long enough for the worker to claim its task before the caller looks.
            std::thread::sleep(Duration::from_millis(2));
            0
        }));
        assert_eq!(got, [7.0]);
    }
}

/// A panic in the caller's share or in a worker's is an error of that call, and the pool runs
/// the next job (and drops) normally.
#[test]
fn a_panic_in_any_share_is_an_error_and_the_pool_goes_on() {
    let w = Workers::new(2);
    for round in 0..20 {
        // The caller's share panics while the workers run theirs (slowly, so they finish after).
        let tasks: Vec<Task> = (0..2)
            .map(|i| {
                Box::new(move || {
                    std::thread::sleep(Duration::from_millis(1));
                    Ok(vec![i as f32])
                }) as Task
            })
            .collect();
        let e = w.run(tasks, || -> usize { panic!("caller share {round}") }).unwrap_err();
        assert!(e.to_string().contains(&format!("caller share {round}")), "{e}");

        // A worker's share panics.
        let tasks: Vec<Task> = vec![Box::new(move || panic!("worker share {round}")), Box::new(|| Ok(vec![1.0]))];
        let (mine, theirs) = w.run(tasks, || round).unwrap();
        assert_eq!(mine, round);
        let e = theirs[0].as_ref().unwrap_err().to_string();
        assert!(e.contains(&format!("worker share {round}")) && e.contains("panicked"), "{e}");
        assert_eq!(theirs[1].as_ref().unwrap(), &[1.0]);

        // Then a normal job.
        let tasks: Vec<Task> = (0..2).map(|i| Box::new(move || Ok(vec![i as f32 + 10.0])) as Task).collect();
        assert_eq!(values(w.run(tasks, || round)), (round, vec![10.0, 11.0]));
    }
    drop(w);
}
